// One stream of the log per browser, shared by the page's tabs.
//
// The tabs elect a leader with a Web Lock (the lock passes to a waiting tab when the leader's
// tab closes or crashes); the leader alone holds the Server-Sent Events connection and hands
// every event to the others over a BroadcastChannel, so that seven tabs use one of the six
// connections a browser allows per host on HTTP/1.1. Each message is a batch `{after, events}`:
// the events after seq `after`, in order. A tab keeps its own cursor (the last seq it applied):
// behind a batch, it reads the gap as JSON pages first; it applies only seqs above its cursor,
// so nothing is shown twice, across reconnects and leader changes. Every tab tells the leader
// whether it is visible; when none has been for `hiddenCloseMs`, the leader closes the stream,
// and opens it again from its cursor when one is shown. Where the browser has no Web Locks (a
// page on plain HTTP other than localhost is not a secure context) every tab holds a stream of
// its own. Nothing here needs a secure context: no `crypto.randomUUID`, Web Locks only when
// the browser has them.

import { ApiError, getJSON, root, url } from './api.js';

const ANNOUNCE_MS = 10_000; // each tab tells the leader whether it is visible this often
const TAB_STALE_MS = 35_000; // a tab not heard from this long is gone
const FILL_LIMIT = 5_000; // further behind than this, a tab reloads its views instead
const DEFAULT_RETRY_MS = 3_000;

/** A random id for this tab (`crypto.getRandomValues`, which every context has; `randomUUID`
 * exists only in secure contexts). */
function tabId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return [...bytes].map((byte) => byte.toString(16).padStart(2, '0')).join('');
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

export class SharedStream {
  /**
   * `handlers`: `events(list)` (new events in seq order), `status(state, detail)` (`connecting`,
   * `live`, `reconnecting`, `expired`, `paused`, `signed-out`), `expired(body)` (the 410
   * document: reload the views, then `setCursor`), `reset()` (too far behind: the same without
   * a notice), `unauthorized()`.
   */
  constructor(hiddenCloseMs, handlers) {
    this.hiddenCloseMs = hiddenCloseMs;
    this.handlers = handlers;
    this.id = tabId();
    this.cursor = null; // the last seq this tab applied (null: the frontier, not yet known)
    this.applying = Promise.resolve(); // what this tab applies, one message after another
    this.leader = false;
    this.tabs = new Map(); // the leader's: tab id -> {visible, at}
    this.running = null; // the leader's: the AbortController of the open stream
    this.halted = false; // the leader's: expired or signed out, until `setCursor` or `resume`
    this.hiddenSince = null;
    this.streamSeq = null; // the leader's: the last seq its stream delivered
    this.retryMs = DEFAULT_RETRY_MS;
    this.lastStatus = ['connecting', ''];
    const name = `session-journal ${root.pathname}`;
    this.lockName = name;
    this.shared = typeof BroadcastChannel === 'function' && !!navigator.locks;
    this.channel = this.shared ? new BroadcastChannel(name) : null;
  }

  start(cursor) {
    this.started = true;
    this.cursor = cursor;
    if (this.shared) {
      this.channel.onmessage = (message) => this.receive(message.data);
      navigator.locks.request(this.lockName, () => new Promise(() => this.lead()));
    } else {
      this.lead();
    }
    document.addEventListener('visibilitychange', () => this.announce());
    addEventListener('pagehide', () => this.post({ t: 'bye', id: this.id }));
    setInterval(() => this.announce(), ANNOUNCE_MS);
    this.announce();
  }

  /** Follow after `cursor` from now on: the first time (a snapshot's `as_of_seq`; null: the
   * frontier), and after the views reloaded (an expiry, a reset, a sign-in). */
  setCursor(cursor) {
    if (!this.started) {
      this.start(cursor);
      return;
    }
    this.applying = this.applying.then(() => {
      this.cursor = cursor;
      if (this.leader && this.halted) {
        this.halted = false;
        this.streamSeq = cursor;
        this.evaluate();
      }
    });
  }

  /** Signed in again: the leader opens the stream. */
  resume() {
    if (!this.started) return; // `setCursor` starts it
    this.post({ t: 'resume' });
    this.receive({ t: 'resume' });
  }

  post(message) {
    if (this.channel) this.channel.postMessage(message);
  }

  /** Send `message` to every tab, this one included. */
  broadcast(message) {
    this.post(message);
    this.receive(message);
  }

  announce() {
    const message = { t: 'tab', id: this.id, visible: document.visibilityState === 'visible' };
    this.post(message);
    if (this.leader) this.noteTab(message);
  }

  receive(message) {
    switch (message.t) {
      case 'batch':
        this.applying = this.applying.then(() => this.apply(message));
        break;
      case 'status':
        this.lastStatus = [message.state, message.detail];
        this.handlers.status(message.state, message.detail);
        break;
      case 'expired':
        this.handlers.expired(message.body);
        break;
      case 'unauthorized':
        this.handlers.unauthorized();
        break;
      case 'hello':
        this.announce();
        break;
      case 'tab':
        if (this.leader) this.noteTab(message);
        break;
      case 'bye':
        if (this.leader) {
          this.tabs.delete(message.id);
          this.evaluate();
        }
        break;
      case 'resume':
        if (this.leader && this.halted) {
          this.halted = false;
          this.evaluate();
        }
        break;
      default:
        break;
    }
  }

  // ---- every tab: applying batches in order ----

  async apply(batch) {
    try {
      if (this.cursor === null) this.cursor = batch.after;
      if (batch.after - this.cursor > FILL_LIMIT) {
        this.cursor = batch.events.length ? batch.events.at(-1).seq : batch.after;
        this.handlers.reset();
        return;
      }
      await this.fill(batch.after);
      const fresh = batch.events.filter((event) => event.seq > this.cursor);
      if (fresh.length) {
        this.cursor = fresh.at(-1).seq;
        this.handlers.events(fresh);
      }
    } catch (error) {
      if (error instanceof ApiError && error.status === 410) {
        this.handlers.expired(error.problem);
      } else if (error instanceof ApiError && error.status === 401) {
        this.handlers.unauthorized();
      } else {
        this.cursor = batch.events.length ? batch.events.at(-1).seq : batch.after;
        this.handlers.reset(); // the gap could not be read: the views are read again
      }
    }
  }

  /** Read the events after this tab's cursor through `target` as JSON pages. */
  async fill(target) {
    while (this.cursor < target) {
      const page = await getJSON('api/events', { after_seq: this.cursor, limit: 1000 });
      const fresh = page.events.filter((event) => event.seq > this.cursor);
      if (fresh.length) this.handlers.events(fresh);
      this.cursor = Math.max(this.cursor, page.next_after_seq);
      if (!page.events.length) break;
    }
  }

  // ---- the leader: the stream ----

  lead() {
    this.leader = true;
    this.streamSeq = this.cursor;
    this.post({ t: 'hello' }); // every tab answers with whether it is visible
    this.announce();
    setInterval(() => this.evaluate(), 1000);
    this.setStatus(...this.lastStatus);
    this.evaluate();
  }

  noteTab(message) {
    const known = this.tabs.has(message.id);
    this.tabs.set(message.id, { visible: message.visible, at: Date.now() });
    if (!known) this.post({ t: 'status', state: this.lastStatus[0], detail: this.lastStatus[1] });
    this.evaluate();
  }

  setStatus(state, detail = '') {
    this.broadcast({ t: 'status', state, detail });
  }

  /** Open the stream while a tab is visible; close it once none has been for the delay. */
  evaluate() {
    if (!this.leader) return;
    const now = Date.now();
    for (const [id, tab] of this.tabs) {
      if (now - tab.at > TAB_STALE_MS && id !== this.id) this.tabs.delete(id);
    }
    const visible = [...this.tabs.values()].some((tab) => tab.visible);
    if (visible) {
      this.hiddenSince = null;
      if (!this.running && !this.halted) this.open();
      return;
    }
    if (this.hiddenSince === null) this.hiddenSince = now;
    if (this.running && now - this.hiddenSince >= this.hiddenCloseMs) {
      this.running.abort();
      this.running = null;
      this.setStatus('paused', 'every tab is hidden: the stream is closed until one is shown');
    }
  }

  open() {
    const controller = new AbortController();
    this.running = controller;
    this.follow(controller.signal).finally(() => {
      if (this.running === controller) this.running = null;
    });
  }

  async follow(signal) {
    let first = true;
    while (!signal.aborted && !this.halted) {
      if (first) this.setStatus('connecting');
      first = false;
      let pause = this.retryMs * (0.5 + Math.random());
      try {
        const params = this.streamSeq === null ? {} : { after_seq: this.streamSeq };
        const response = await fetch(url('api/events/stream', params), {
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
          this.setStatus('signed-out', 'the token was refused');
          this.broadcast({ t: 'unauthorized' });
          return;
        }
        if (response.ok) {
          const ended = await this.read(response.body, signal);
          if (ended === 'expired') return;
          if (ended === 'rotate') pause = 0;
        }
      } catch {
        if (signal.aborted) return;
      }
      if (signal.aborted) return;
      this.setStatus('reconnecting');
      await sleep(pause, signal);
    }
  }

  expire(body) {
    this.halted = true;
    this.setStatus('expired', 'events after the cursor were pruned');
    this.broadcast({ t: 'expired', body });
  }

  /** Read one stream until it ends; what ended it (`rotate`, `shutdown`, `expired`, `end`). */
  async read(body, signal) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let heard = Date.now();
    let silenceMs = 45_000;
    const watchdog = setInterval(() => {
      if (Date.now() - heard > silenceMs) reader.cancel(); // a dead connection: reconnect
    }, 1000);
    let buffer = '';
    let frame = { event: 'message', data: [] };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || signal.aborted) return 'end';
        heard = Date.now();
        buffer += value;
        const lines = buffer.split(/\r\n|\r|\n/);
        buffer = lines.pop();
        let batch = null;
        for (const line of lines) {
          if (line !== '') {
            if (line.startsWith(':')) continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'data') frame.data.push(text);
            else if (field === 'event') frame.event = text;
            else if (field === 'retry' && /^[0-9]+$/.test(text)) this.retryMs = Number(text);
            continue;
          }
          const { event } = frame;
          const data = frame.data.join('\n');
          frame = { event: 'message', data: [] };
          if (event === 'api_event') {
            const item = JSON.parse(data);
            if (this.streamSeq === null || item.seq > this.streamSeq) {
              if (batch === null) batch = { t: 'batch', after: this.streamSeq, events: [] };
              batch.events.push(item);
              this.streamSeq = item.seq;
            }
          } else if (event === 'ready') {
            const ready = JSON.parse(data);
            if (this.streamSeq === null) this.streamSeq = ready.cursor;
            silenceMs = (ready.heartbeat_s * 2 + 5) * 1000;
            this.setStatus('live');
          } else if (event === 'expired') {
            if (batch) this.broadcast(batch);
            this.expire(JSON.parse(data));
            return 'expired';
          } else if (event === 'rotate' || event === 'shutdown') {
            if (batch) this.broadcast(batch);
            return event;
          }
        }
        if (batch) this.broadcast(batch);
      }
    } finally {
      clearInterval(watchdog);
    }
  }
}
