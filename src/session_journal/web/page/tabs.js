// The tab protocol: what the page's tabs tell each other over their BroadcastChannel. Every
// message is an object with a `kind` and named fields; `messages` builds each kind, and a
// `TabChannel` hands what arrives to the handler named by its kind. The channel's name carries
// the protocol's version, so that tabs of an older page (before an upgrade) and of this one
// never read each other's messages: each kind of page then elects its own leader.

export const PROTOCOL = 'session-journal/2';

/** The messages, by kind. */
export const messages = {
  /** The leader's stream delivered `events`, the events after seq `after`, in order. */
  batch: (after, events) => ({ kind: 'batch', after, events }),
  /** The stream's state (`connecting`, `live`, `reconnecting`, `expired`, `paused`,
   * `signed-out`) and a sentence about it. */
  status: (state, detail = '') => ({ kind: 'status', state, detail }),
  /** The server refused the cursor (the 410 or 409 problem document). */
  expired: (problem) => ({ kind: 'expired', problem }),
  /** The server refused the token. */
  unauthorized: () => ({ kind: 'unauthorized' }),
  /** A new leader asks every tab whether it is visible. */
  hello: () => ({ kind: 'hello' }),
  /** Tab `tab` is (or is not) visible. */
  tab: (tab, visible) => ({ kind: 'tab', tab, visible }),
  /** Tab `tab` closes. */
  bye: (tab) => ({ kind: 'bye', tab }),
  /** Signed in again: the leader opens the stream. */
  resume: () => ({ kind: 'resume' }),
};

/** The channel name of the page mounted at `path`. */
export function channelName(path) {
  return `${PROTOCOL} ${path}`;
}

/** A tab's end of the channel: `post` reaches the other tabs, `broadcast` every tab, this one
 * included. `handlers` maps a kind to the function given each message of that kind; a message
 * of no known kind (a later protocol's) is ignored. Without a `BroadcastChannel` (`channel`
 * null) the tab is alone. */
export class TabChannel {
  constructor(channel, handlers) {
    this.channel = channel;
    this.handlers = handlers;
    if (channel) channel.onmessage = (event) => this.receive(event.data);
  }

  post(message) {
    if (this.channel) this.channel.postMessage(message);
  }

  broadcast(message) {
    this.post(message);
    this.receive(message);
  }

  receive(message) {
    const kind = message && typeof message === 'object' ? message.kind : undefined;
    if (typeof kind === 'string' && Object.hasOwn(this.handlers, kind)) this.handlers[kind](message);
  }
}
