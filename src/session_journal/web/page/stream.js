// One stream of the log per browser, shared by the page's tabs.
//
// The tabs elect a leader with a Web Lock (the lock passes to a waiting tab when the leader's
// tab closes or crashes); the leader alone holds the Server-Sent Events connection
// (transport.js) and hands every batch of events to the others over a BroadcastChannel
// (tabs.js), so that seven tabs use one of the six connections a browser allows per host on
// HTTP/1.1. A tab keeps its own cursor (gap.js): behind a batch, it reads the gap as JSON pages
// first; it applies only seqs above its cursor, so nothing is shown twice, across reconnects and
// leader changes. Every tab tells the leader whether it is visible; when none has been for
// `hiddenCloseMs` (audience.js), the leader closes the stream, and opens it again from its
// cursor when one is shown. Where the browser has no Web Locks (a page on plain HTTP other than
// localhost is not a secure context) every tab holds a stream of its own. Nothing here needs a
// secure context: no `crypto.randomUUID`, Web Locks only when the browser has them.

import { getJSON, root } from './api.js';
import { Audience } from './audience.js';
import { GapFiller } from './gap.js';
import { channelName, messages, TabChannel } from './tabs.js';
import { LogConnection } from './transport.js';

const ANNOUNCE_MS = 10_000; // each tab tells the leader whether it is visible this often

/** A random id for this tab (`crypto.getRandomValues`, which every context has; `randomUUID`
 * exists only in secure contexts). */
function tabId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return [...bytes].map((byte) => byte.toString(16).padStart(2, '0')).join('');
}

/** The shared stream: it starts the tab, and, in the tab that leads, the connection. */
export class SharedStream {
  /**
   * `handlers`: `events(list)` (new events in seq order), `status(state, detail)` (`connecting`,
   * `live`, `reconnecting`, `expired`, `paused`, `signed-out`), `expired(problem)` (the 410 or
   * 409 document: reload the views, then `setCursor`), `reset()` (too far behind: the same
   * without a notice), `unauthorized()`.
   */
  constructor(hiddenCloseMs, handlers) {
    this.hiddenCloseMs = hiddenCloseMs;
    this.handlers = handlers;
    this.id = tabId();
    this.name = channelName(root.pathname);
    this.lastStatus = messages.status('connecting');
    this.leader = null; // the leader's: {audience, connection}
    this.started = false;
    this.gap = new GapFiller(
      (after, limit) => getJSON('api/events', { after_seq: after, limit }),
      handlers,
    );
    const shared = typeof BroadcastChannel === 'function' && !!navigator.locks;
    this.shared = shared;
    // Until `start`, the tab ignores what the others say: it is loading its first view, and its
    // cursor is the snapshot `start` is given, not the first batch it would hear.
    const started = (handler) => (message) => { if (this.started) handler(message); };
    this.channel = new TabChannel(shared ? new BroadcastChannel(this.name) : null, {
      batch: started((message) => this.gap.take(message)),
      status: (message) => {
        this.lastStatus = message;
        handlers.status(message.state, message.detail);
      },
      expired: started((message) => handlers.expired(message.problem)),
      unauthorized: started(() => handlers.unauthorized()),
      hello: started(() => this.announce()),
      tab: (message) => this.noteTab(message),
      bye: (message) => {
        if (!this.leader) return;
        this.leader.audience.forget(message.tab);
        this.evaluate();
      },
      resume: () => {
        if (!this.leader || !this.leader.connection.halted) return;
        this.leader.connection.resume();
        this.evaluate();
      },
    });
  }

  start(cursor) {
    this.started = true;
    this.gap.moveTo(cursor);
    if (this.shared) navigator.locks.request(this.name, () => new Promise(() => this.lead()));
    else this.lead();
    document.addEventListener('visibilitychange', () => this.announce());
    addEventListener('pagehide', () => this.channel.post(messages.bye(this.id)));
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
    this.gap.moveTo(cursor, () => {
      if (this.leader && this.leader.connection.halted) {
        this.leader.connection.resumeFrom(cursor);
        this.evaluate();
      }
    });
  }

  /** Signed in again: the leader opens the stream. */
  resume() {
    if (this.started) this.channel.broadcast(messages.resume()); // else `setCursor` starts it
  }

  announce() {
    const message = messages.tab(this.id, document.visibilityState === 'visible');
    this.channel.post(message);
    this.noteTab(message);
  }

  noteTab(message) {
    if (!this.leader) return;
    if (this.leader.audience.note(message.tab, message.visible, Date.now())) {
      this.channel.post(this.lastStatus); // a new tab learns the stream's state
    }
    this.evaluate();
  }

  // ---- the leader ----

  lead() {
    const connection = new LogConnection({
      status: (state, detail) => this.channel.broadcast(messages.status(state, detail)),
      batch: (after, events) => this.channel.broadcast(messages.batch(after, events)),
      expired: (problem) => this.channel.broadcast(messages.expired(problem)),
      unauthorized: () => this.channel.broadcast(messages.unauthorized()),
    });
    connection.seq = this.gap.cursor;
    this.leader = { audience: new Audience(this.hiddenCloseMs, this.id), connection };
    this.channel.post(messages.hello()); // every tab answers with whether it is visible
    this.announce();
    setInterval(() => this.evaluate(), 1000);
    this.channel.broadcast(this.lastStatus);
    this.evaluate();
  }

  /** Open the stream while a tab is visible; close it once none has been for the delay. */
  evaluate() {
    if (!this.leader) return;
    const { audience, connection } = this.leader;
    const decision = audience.decide(Date.now());
    if (decision === 'open') {
      connection.start();
    } else if (decision === 'close' && connection.running) {
      connection.stop();
      this.channel.broadcast(messages.status('paused', 'every tab is hidden: the stream is closed until one is shown'));
    }
  }
}
