// The feed: the last 200 events, then live; pause and resume; filters (a session, event types)
// that apply to live events too; at most 1,000 rows, older ones dropping off; "load older"
// pages back with `before_seq`. Each row says what happened in one line (summaries.js); its
// JSON, as served, is one click away.

import { getJSON } from './api.js';
import { cut, el, linkButton, svg, timeZone, timeNode } from './dom.js';
import { bars, RateSeries } from './rate.js';
import { EventMemory, summarize } from './summaries.js';
import { formatTime } from './time.js';

const FEED_FIRST = 200;
export const REFRESH_MS = 5_000; // lifecycle saves append no event: visible views refresh this often
const FEED_MAX_ROWS = 1000;
const EMBEDDED_MAX_ROWS = 200; // a session's own events, beside its timeline and transcript
const DRAW_MS = 1000; // live rows are drawn at most this often (a burst: one change, one layout)
const NEWEST = Number.MAX_SAFE_INTEGER; // `before_seq` of the newest page
const RATE_MINUTES = 15;
const RATE_DRAW_MS = 1_000; // the rate chart is drawn at most this often, and this often at least
const RATE_RETRY_MS = 5_000; // a failed read of the rate is tried again after this
const CHART = { width: 600, height: 60 };

/** The feed's chart of events per minute (every event the token sees: the feed's filters do
 * not apply), from `GET api/events/rate`, then kept current by the stream's events. The
 * window moves with the server's clock (the answer's `as_of_ms`), not the browser's. */
class RateChart {
  constructor() {
    this.series = null;
    this.offsetMs = 0; // the server's clock less this browser's
    this.loads = 0; // the latest load wins
    this.pending = null; // events the stream brought while a load was on its way
    this.failedAt = null; // a failed load is tried again after RATE_RETRY_MS
    this.drawn = '';
    this.bars = svg('g', { class: 'bars' });
    this.scale = el('span', { class: 'muted' });
    this.node = el('figure', { class: 'rate', id: 'feed-rate' },
      svg('svg', {
        viewBox: `0 0 ${CHART.width} ${CHART.height}`, preserveAspectRatio: 'none', role: 'img',
        'aria-label': `Events per minute over the last ${RATE_MINUTES} minutes`,
      }, this.bars),
      el('figcaption', {}, `Events per minute, last ${RATE_MINUTES} minutes (all events; the filters do not apply) `, this.scale));
    this.timer = setInterval(() => this.tick(), RATE_DRAW_MS);
  }

  now() {
    return Date.now() + this.offsetMs;
  }

  /** Read the rate again (the view loaded); its `as_of_seq`, or null when it could not be read
   * (said in the caption, tried again later; the feed is drawn all the same). */
  async load() {
    const ticket = ++this.loads;
    this.pending = [];
    let rate;
    try {
      rate = await getJSON('api/events/rate', { minutes: RATE_MINUTES });
    } catch (error) {
      if (ticket !== this.loads) return null;
      this.pending = null;
      this.series = null;
      this.failedAt = Date.now();
      this.bars.replaceChildren();
      this.drawn = '';
      this.scale.textContent = `· could not be read: ${error.message}`;
      return null;
    }
    if (ticket !== this.loads) return null; // a later load replaces this one
    this.offsetMs = rate.as_of_ms - Date.now();
    this.series = new RateSeries(rate);
    this.series.add(this.pending, this.now()); // those above its as_of_seq
    this.pending = null;
    this.failedAt = null;
    this.draw();
    return rate.as_of_seq;
  }

  add(events) {
    if (this.pending) this.pending.push(...events);
    else if (this.series) this.series.add(events, this.now());
  }

  tick() {
    if (document.visibilityState !== 'visible') return;
    if (!this.series && this.failedAt !== null && Date.now() - this.failedAt >= RATE_RETRY_MS) {
      this.failedAt = null;
      this.load();
      return;
    }
    this.draw();
  }

  /** Draw the bars, when they changed (a bar being hovered keeps its tooltip). */
  draw() {
    if (!this.series) return;
    this.series.advance(this.now());
    const minutes = this.series.minutes();
    const key = `${this.series.startMs} ${timeZone()} ${this.series.counts.join(',')}`;
    if (key === this.drawn) return;
    this.drawn = key;
    const drawn = bars(minutes.map((minute) => minute.count), CHART.width, CHART.height);
    const zone = timeZone();
    this.bars.replaceChildren(...drawn.bars.map((bar, index) => svg('rect', {
      x: bar.x.toFixed(1), y: bar.y.toFixed(1), width: bar.width.toFixed(1), height: Math.max(bar.height, 1).toFixed(1),
      class: bar.height ? 'bar' : 'bar empty', 'data-count': minutes[index].count,
    }, svg('title', {}, `${formatTime(minutes[index].startMs, zone).replace(/:00 /, ' ')}: ${minutes[index].count} event${minutes[index].count === 1 ? '' : 's'}`))));
    const now = minutes.at(-1).count;
    this.scale.textContent = `· this minute ${now.toLocaleString('en')} · highest ${drawn.top.toLocaleString('en')}`;
  }

  stop() {
    clearInterval(this.timer);
  }
}

export function nothingOlder(page, limit) {
  return page.events.length < limit || page.next_before_seq <= page.pruned_through + 1;
}

/** The JSON of `event` one click away: a `<details>` with the served event, and a button that
 * selects it (and copies it where the browser lets a page do so); written when first opened (a
 * thousand rows hold no JSON text, and no node of it, until asked). */
function jsonDetails(event) {
  const details = el('details', { class: 'json' }, el('summary', {}, 'JSON'));
  details.addEventListener('toggle', () => {
    if (!details.open || details.childElementCount > 1) return;
    const pre = el('pre', { class: 'json' }, JSON.stringify(event, null, 2));
    const note = el('span', { class: 'muted' });
    const copy = el('button', {
      type: 'button',
      onclick: () => {
        getSelection().selectAllChildren(pre);
        let copied;
        try {
          copied = document.execCommand('copy');
        } catch {
          copied = false; // refused: the JSON stays selected
        }
        note.textContent = copied ? ' copied' : ' selected: press Ctrl+C to copy';
      },
    }, 'Copy');
    details.append(pre, copy, note);
  });
  return details;
}

export class FeedView {
  /** `embedded`: the events of one session inside its view (no filter inputs). */
  constructor(app, params, embedded = false) {
    this.app = app;
    this.first = embedded ? 20 : FEED_FIRST;
    this.maxRows = embedded ? EMBEDDED_MAX_ROWS : FEED_MAX_ROWS; // the rows it keeps
    this.session = params.get('session') || '';
    this.types = (params.get('type') || '').split(',').map((t) => t.trim()).filter(Boolean);
    this.paused = false;
    this.missed = 0; // live events that matched while paused
    this.newest = 0; // the highest seq this view has seen
    this.memory = new EventMemory(); // earlier events, for the summaries of later ones
    this.rows = el('tbody', { role: 'rowgroup' });
    this.queued = []; // live events matched, not drawn yet (`DRAW_MS`)
    this.drawTimer = null;
    this.drawnAt = -Infinity; // when live rows were last drawn (`performance.now()`)
    this.loaded = false;
    // A first load that failed (the error is shown) is tried again while the tab is visible.
    this.retry = setInterval(() => {
      if (!this.loaded && !this.loading && document.visibilityState === 'visible') this.app.run(this.load());
    }, REFRESH_MS);
    this.state = el('span', { class: 'muted' });
    this.empty = el('p', { class: 'muted empty', hidden: true });
    this.pause = el('button', { type: 'button', onclick: () => this.togglePause() }, 'Pause');
    this.older = el('button', { type: 'button', disabled: true, onclick: () => this.loadOlder() }, 'Load older');
    const session = el('input', { type: 'text', value: this.session, placeholder: 'session id', 'aria-label': 'Session', maxlength: 200 });
    const types = el('input', { type: 'text', value: this.types.join(','), placeholder: 'types, comma-separated', 'aria-label': 'Event types', maxlength: 1000 });
    const apply = () => this.app.navigate({ view: 'feed', session: session.value.trim(), type: types.value.trim() });
    for (const input of [session, types]) {
      input.addEventListener('keydown', (event) => { if (event.key === 'Enter') apply(); });
    }
    this.rate = embedded ? null : new RateChart();
    this.node = el(embedded ? 'div' : 'section', { id: embedded ? 'session-events' : 'feed' },
      embedded ? el('h3', {}, 'Events (newest first)') : el('h2', {}, 'Feed'),
      this.rate ? this.rate.node : null,
      el('div', { class: 'filters' },
        embedded ? null : [el('label', {}, 'Session ', session), el('label', {}, 'Types ', types),
          el('button', { type: 'button', onclick: apply }, 'Apply')],
        this.pause, this.state),
      // Explicit roles: its rows are laid out as a grid (page.css), and some browsers drop a
      // table's meaning when its display changes.
      el('table', { class: 'events', role: 'table' },
        el('thead', { role: 'rowgroup' }, el('tr', { role: 'row' }, ['Seq', 'Recorded', 'Session', 'What happened'].map((h) => el('th', { role: 'columnheader' }, h)))),
        this.rows),
      this.empty,
      this.older);
  }

  query() {
    return { session_id: this.session, type: this.types };
  }

  matches(event) {
    return (!this.session || event.session_id === this.session)
      && (!this.types.length || this.types.includes(event.event.type));
  }

  /** The newest page; its `latest_seq`, the cursor to follow from. Live events that arrive
   * while it is read are kept and drawn after it (those above its `latest_seq`). */
  async load() {
    this.loads = (this.loads || 0) + 1;
    const ticket = this.loads;
    this.loading = [];
    this.older.disabled = true;
    let page;
    let rateAsOf;
    try {
      [page, rateAsOf] = await Promise.all([
        getJSON('api/events', { ...this.query(), before_seq: NEWEST, limit: this.first }),
        this.rate ? this.rate.load() : null,
      ]);
    } catch (error) {
      if (ticket === this.loads) this.loading = null;
      throw error;
    }
    if (ticket !== this.loads) return page.latest_seq; // a later load replaces this one
    const loading = this.loading;
    this.loading = null;
    this.loaded = true;
    this.showOlder(page);
    this.memory.remember(page.events);
    this.queued = []; // (the page holds them, or the newer ones come below)
    this.rows.replaceChildren(...page.events.map((event) => this.row(event)));
    this.newest = page.latest_seq;
    this.paused = false;
    this.missed = 0;
    this.showState();
    this.onEvents(loading);
    this.showEmpty();
    // Follow from the lower of the two reads: the chart counts what came after its own.
    return rateAsOf === null ? page.latest_seq : Math.min(page.latest_seq, rateAsOf);
  }

  row(event) {
    const { text, alert } = summarize(event, this.memory);
    const tr = el('tr', { class: alert ? 'alert' : null, role: 'row' },
      el('td', { class: 'seq', role: 'cell' }, String(event.seq)),
      el('td', { class: 'when', role: 'cell' }, timeNode(event.recorded_at_ms)),
      el('td', { class: 'id', role: 'cell' }, linkButton(event.session_id, () => this.app.navigate({ view: 'session', id: event.session_id }))),
      el('td', { class: 'what', role: 'cell' },
        alert ? el('span', { class: 'badge' }, `⚠ ${alert}`) : null,
        el('span', { class: 'summary-text' }, cut(text, 500)),
        jsonDetails(event)));
    tr.dataset.seq = String(event.seq);
    tr.dataset.type = String(event.event.type);
    return tr;
  }

  /** "Load older" after `page`: disabled, saying so, when nothing older is retained. */
  showOlder(page) {
    const none = nothingOlder(page, this.first);
    this.older.disabled = none;
    this.older.textContent = none ? 'Nothing older is retained' : 'Load older';
  }

  /** Words where there are no rows: nothing yet, or nothing matches the filters. */
  showEmpty() {
    const filtered = this.session || this.types.length;
    const text = filtered ? 'No retained events match these filters.' : 'No events yet: new ones appear here as they are committed.';
    this.empty.textContent = text;
    this.empty.hidden = this.rows.childElementCount > 0;
  }

  onEvents(events) {
    if (this.rate) this.rate.add(events); // every event, before the filters
    if (this.loading) {
      this.loading.push(...events.filter((event) => this.matches(event)));
      this.loading.splice(0, this.loading.length - this.maxRows); // the newest only
      return;
    }
    const fresh = events.filter((event) => event.seq > this.newest && this.matches(event));
    if (events.length) this.newest = Math.max(this.newest, events.at(-1).seq);
    if (!fresh.length) return;
    if (this.paused) { // nothing remembered: Resume reads the newest page again
      this.missed += fresh.length;
      this.showState();
      return;
    }
    this.queued.push(...fresh);
    if (this.queued.length > this.maxRows) this.queued.splice(0, this.queued.length - this.maxRows);
    if (this.drawTimer === null) { // at once after a quiet spell, else a second after the last
      const wait = Math.max(0, this.drawnAt + DRAW_MS - performance.now());
      this.drawTimer = setTimeout(() => this.drawQueued(), wait);
    }
  }

  /** Draw the live rows queued, in one change of the table (newest on top). */
  drawQueued() {
    this.drawTimer = null;
    this.drawnAt = performance.now();
    const fresh = this.queued;
    this.queued = [];
    if (!fresh.length) return;
    this.memory.remember(fresh);
    const rows = document.createDocumentFragment();
    for (let index = fresh.length - 1; index >= 0; index -= 1) rows.append(this.row(fresh[index]));
    this.rows.prepend(rows);
    if (this.rows.childElementCount > this.maxRows) {
      while (this.rows.childElementCount > this.maxRows) this.rows.lastChild.remove();
      if (!this.olderLoading) { // what dropped off is older (a page on its way decides itself)
        this.older.disabled = false;
        this.older.textContent = 'Load older';
      }
    }
    this.showEmpty();
  }

  togglePause() {
    if (this.paused) {
      this.app.run(this.load()); // the newest page again: nothing missed, nothing twice
    } else {
      this.drawQueued(); // what came before the click is drawn now; nothing after it
      this.paused = true;
      this.showState();
    }
  }

  async loadOlder() {
    const last = this.rows.lastElementChild;
    const before = last ? Number(last.dataset.seq) : NEWEST;
    this.older.disabled = true; // one page at a time: a second click would read the same one
    this.olderLoading = true;
    const ticket = this.loads;
    let page;
    try {
      page = await this.app.run(getJSON('api/events', { ...this.query(), before_seq: before, limit: this.first }));
    } finally {
      this.olderLoading = false;
    }
    if (ticket !== this.loads) return; // the rows were read again meanwhile: this page may not fit
    const bottom = this.rows.lastElementChild;
    if (!page || (bottom ? Number(bottom.dataset.seq) : NEWEST) !== before) {
      // Failed (the error is shown), or live rows pushed the bottom row off meanwhile: this
      // page would not join the rows. It may be asked again, from the new bottom.
      this.older.disabled = false;
      this.older.textContent = 'Load older';
      return;
    }
    this.showOlder(page);
    this.memory.remember(page.events);
    for (const event of page.events) this.rows.append(this.row(event));
    if (this.rows.childElementCount > this.maxRows) {
      while (this.rows.childElementCount > this.maxRows) this.rows.firstChild.remove();
      this.missed += this.queued.length; // (not drawn: they would leave a hole too)
      this.queued = [];
      clearTimeout(this.drawTimer);
      this.drawTimer = null;
      this.paused = true; // the newest rows dropped: live rows would leave a hole
      this.showState();
    }
  }

  showState() {
    this.pause.textContent = this.paused ? 'Resume' : 'Pause';
    this.state.textContent = this.paused
      ? `paused${this.missed ? `: ${this.missed} new event${this.missed === 1 ? '' : 's'}` : ''}`
      : '';
  }

  stop() {
    clearInterval(this.retry);
    clearTimeout(this.drawTimer);
    if (this.rate) this.rate.stop();
  }
}
