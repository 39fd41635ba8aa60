// The leader's view of the tabs it serves: which are visible, and whether the stream should be
// open. Pure: the caller gives the time.

/** A tab not heard from this long is gone (tabs announce themselves every 10 s). */
export const TAB_STALE_MS = 35_000;

/** The tabs a leader serves and whether any is visible. The stream is open while a tab is
 * visible, and closes once none has been for `hiddenCloseMs`. */
export class Audience {
  constructor(hiddenCloseMs, self) {
    this.hiddenCloseMs = hiddenCloseMs;
    this.self = self; // the leader's own tab: never stale
    this.tabs = new Map(); // tab id -> {visible, at}
    this.hiddenSince = null; // when the last visible tab was hidden (null: one is visible)
  }

  /** Tab `id` said at `now` whether it is visible; true when it is new to the leader. */
  note(id, visible, now) {
    const known = this.tabs.has(id);
    this.tabs.set(id, { visible, at: now });
    return !known;
  }

  /** Tab `id` closed. */
  forget(id) {
    this.tabs.delete(id);
  }

  /** What the stream should do at `now`: `open` (a tab is visible), `close` (none has been for
   * `hiddenCloseMs`) or `wait` (hidden, not for long enough yet). */
  decide(now) {
    for (const [id, tab] of this.tabs) {
      if (id !== this.self && now - tab.at > TAB_STALE_MS) this.tabs.delete(id);
    }
    if ([...this.tabs.values()].some((tab) => tab.visible)) {
      this.hiddenSince = null;
      return 'open';
    }
    if (this.hiddenSince === null) this.hiddenSince = now;
    return now - this.hiddenSince >= this.hiddenCloseMs ? 'close' : 'wait';
  }
}
