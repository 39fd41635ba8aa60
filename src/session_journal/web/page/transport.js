// The leader's connection to `GET api/events/stream`: it opens the stream after its last seq,
// reads it with the SSE parser, hands on each batch of events, and reconnects after the delay
// the server asked for (± 50 %), at once after a `rotate`. A 410 or 409 (the cursor was pruned,
// or is ahead of the log) and a 401 halt it until `resumeFrom` or `resume`.

import { url } from './api.js';
import { SseParser } from './sse.js';

const DEFAULT_RETRY_MS = 3_000;
const MAX_RETRY_MS = 600_000; // a longer `retry:` is taken as ten minutes (timers overflow past 2^31 ms)
const DEFAULT_SILENCE_MS = 45_000; // until `ready` says the heartbeat's period

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

/** The stream of the log, reconnecting. `handlers`: `status(state, detail)`, `batch(after,
 * events)` (the events after seq `after`, in order), `expired(problem)`, `unauthorized()`.
 * `options.fetch` and `options.random` stand in for the browser's in tests. */
export class LogConnection {
  constructor(handlers, options = {}) {
    this.handlers = handlers;
    this.fetch = options.fetch || ((...args) => fetch(...args));
    this.random = options.random || Math.random;
    this.seq = null; // the last seq the stream delivered (null: the frontier, not yet known)
    this.retryMs = DEFAULT_RETRY_MS;
    this.halted = false; // expired or signed out, until `resumeFrom` or `resume`
    this.controller = null; // of the open stream
    this.done = Promise.resolve(); // settles when the open stream's loop ended
  }

  /** Whether the stream is open (or reconnecting). */
  get running() {
    return this.controller !== null;
  }

  /** Open the stream unless it is open or halted. */
  start() {
    if (this.controller || this.halted) return;
    const controller = new AbortController();
    this.controller = controller;
    this.done = this.follow(controller.signal).finally(() => {
      if (this.controller === controller) this.controller = null;
    });
  }

  /** Close the stream (it stays closed until `start`). */
  stop() {
    if (this.controller) this.controller.abort();
    this.controller = null;
  }

  /** Follow after `seq` from now on (the views were read again as of it). */
  resumeFrom(seq) {
    this.halted = false;
    this.seq = seq;
  }

  /** Signed in again. */
  resume() {
    this.halted = false;
  }

  async follow(signal) {
    let first = true;
    while (!signal.aborted && !this.halted) {
      if (first) this.handlers.status('connecting', '');
      first = false;
      let rotated = false;
      try {
        const params = this.seq === null ? {} : { after_seq: this.seq };
        const response = await this.fetch(url('api/events/stream', params), {
          signal,
          cache: 'no-store',
          headers: { accept: 'text/event-stream' },
        });
        if (response.status === 410 || response.status === 409) {
          this.expire(await response.json());
          return;
        }
        if (response.status === 401) {
          this.halted = true;
          this.handlers.status('signed-out', 'the token was refused');
          this.handlers.unauthorized();
          return;
        }
        if (response.ok) {
          const ended = await this.read(response.body, signal);
          if (ended === 'expired') return;
          rotated = ended === 'rotate';
        }
      } catch {
        if (signal.aborted) return;
      }
      if (signal.aborted) return;
      this.handlers.status('reconnecting', '');
      await sleep(rotated ? 0 : this.retryMs * (0.5 + this.random()), signal); // the stream's own `retry:`
    }
  }

  expire(problem) {
    this.halted = true;
    this.handlers.status('expired', 'events after the cursor were pruned');
    this.handlers.expired(problem);
  }

  /** Read one stream until it ends; what ended it (`rotate`, `shutdown`, `expired`, `end`). A
   * stream silent for twice its heartbeat (and 5 s) is a dead connection: it is cancelled. */
  async read(body, signal) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SseParser();
    let heard = Date.now();
    let silenceMs = DEFAULT_SILENCE_MS;
    const watchdog = setInterval(() => {
      if (Date.now() - heard > silenceMs) reader.cancel();
    }, 1000);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || signal.aborted) return 'end';
        heard = Date.now();
        const after = this.seq;
        const events = [];
        let ended = null;
        for (const frame of parser.push(value)) {
          if (frame.event === 'api_event') {
            const item = JSON.parse(frame.data);
            if (this.seq === null || item.seq > this.seq) {
              events.push(item);
              this.seq = item.seq;
            }
          } else if (frame.event === 'ready') {
            const ready = JSON.parse(frame.data);
            if (this.seq === null) this.seq = ready.cursor;
            silenceMs = (ready.heartbeat_s * 2 + 5) * 1000;
            this.handlers.status('live', '');
          } else if (['expired', 'rotate', 'shutdown'].includes(frame.event)) {
            ended = frame;
            break;
          }
        }
        if (parser.retryMs !== null) this.retryMs = Math.min(parser.retryMs, MAX_RETRY_MS);
        if (events.length) this.handlers.batch(after === null ? events[0].seq - 1 : after, events);
        if (ended && ended.event === 'expired') {
          this.expire(JSON.parse(ended.data));
          return 'expired';
        }
        if (ended) return ended.event;
      }
    } finally {
      clearInterval(watchdog);
    }
  }
}
