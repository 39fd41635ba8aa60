// Every tab's cursor: the batches of the shared stream applied in order, the gaps before them
// read as JSON pages, nothing applied twice.

/** Further behind than this many seqs, a tab reloads its views instead of reading the gap. */
export const FILL_LIMIT = 5_000;
const FILL_PAGE = 1_000;

/** One tab's cursor over the log. A batch `{after, events}` (the events after seq `after`, in
 * order) is applied after every batch before it: the gap between the cursor and `after` is read
 * first with `readPage(afterSeq, limit)` (a page of `GET api/events`), then the batch's events
 * above the cursor are handed on. `handlers`: `events(list)`, `reset()` (too far behind, or the
 * gap could not be read: the views are read again), `expired(problem)` (410), `unauthorized()`
 * (401). */
export class GapFiller {
  constructor(readPage, handlers) {
    this.readPage = readPage;
    this.handlers = handlers;
    this.cursor = null; // the last seq applied (null: the frontier, not yet known)
    this.queue = Promise.resolve(); // what is applied, one step after another
  }

  /** Apply `batch` once the steps queued before it are done; the promise of that. */
  take(batch) {
    this.queue = this.queue.then(() => this.apply(batch));
    return this.queue;
  }

  /** Move the cursor to `cursor` once the steps queued before are done, then call `then`
   * (a snapshot read: the views were loaded again as of `cursor`). */
  moveTo(cursor, then = () => {}) {
    this.queue = this.queue.then(() => {
      this.cursor = cursor;
      then();
    });
    return this.queue;
  }

  async apply(batch) {
    try {
      if (this.cursor === null) this.cursor = batch.after;
      if (batch.after - this.cursor > FILL_LIMIT) {
        this.skip(batch);
        return;
      }
      await this.fill(batch.after);
      const fresh = batch.events.filter((event) => event.seq > this.cursor);
      if (fresh.length) {
        this.cursor = fresh.at(-1).seq;
        this.handlers.events(fresh);
      }
    } catch (error) {
      const status = error && error.status;
      if (status === 410) this.handlers.expired(error.problem);
      else if (status === 401) this.handlers.unauthorized();
      else this.skip(batch);
    }
  }

  /** Past `batch` without reading what lies before it: the views are read again. */
  skip(batch) {
    this.cursor = batch.events.length ? batch.events.at(-1).seq : batch.after;
    this.handlers.reset();
  }

  /** Read the events after the cursor through `target`; it ends when the cursor reached
   * `target` or a page no longer moves it (nothing is left to read). */
  async fill(target) {
    while (this.cursor < target) {
      const page = await this.readPage(this.cursor, FILL_PAGE);
      const fresh = page.events.filter((event) => event.seq > this.cursor);
      if (fresh.length) this.handlers.events(fresh);
      const next = Math.max(this.cursor, page.next_after_seq, fresh.length ? fresh.at(-1).seq : 0);
      if (next === this.cursor) break;
      this.cursor = next;
    }
  }
}
