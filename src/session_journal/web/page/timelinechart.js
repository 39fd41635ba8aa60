// The session view's timeline, drawn: plain SVG built by DOM calls (the page's policy allows no
// HTML parsing), each turn and mark focusable, its summary shown on hover or focus. What to draw
// comes from timeline.js.

import { getJSON } from './api.js';
import { el, svg, timeZone } from './dom.js';
import { EventMemory, summarize } from './summaries.js';
import { formatTime } from './time.js';
import { layout, SHOWN_TURNS, TIMELINE_TYPES, TimelineModel } from './timeline.js';

const PLOT = { width: 1000, height: 74, barY: 6, barHeight: 18, markY: 42, axisY: 62 };
const PAGE = 1000; // events a read (the server's most)
const NEWEST = Number.MAX_SAFE_INTEGER; // `before_seq` of the newest page
const GROW_MS = 1000; // a running turn's bar grows this often (while the page is shown)
const DRAW_MS = 1000; // live events are drawn at most this often (at once after a quiet spell)
const HINT = 'Hover over a turn or a mark, or focus one (Tab, then ← →), to read it.';
const ALERTS = ['failed', 'rejected'];

/** Each mark's shape (told apart without colour), centred on `x`, `y`. */
const SHAPES = {
  question: (x, y) => svg('circle', { cx: x, cy: y, r: 5.5 }),
  answer: (x, y) => svg('rect', { x: x - 5, y: y - 5, width: 10, height: 10 }),
  fault: (x, y) => svg('path', { d: `M ${x} ${y - 7} l 7 7 l -7 7 l -7 -7 z` }),
  command: (x, y) => svg('path', { d: `M ${x} ${y - 6} l 6 11 l -12 0 z` }),
  activity: (x, y) => svg('rect', { x: x - 1.5, y: y - 7, width: 3, height: 14 }),
  unstarted: (x, y) => svg('path', { d: `M ${x - 5} ${y - 5} l 10 10 m 0 -10 l -10 10`, class: 'cross' }),
};

function outcomeClass(turn) {
  if (turn.running) return 'running';
  if (!turn.outcome) return 'unknown';
  return ['completed', 'failed', 'rejected', 'cancelled', 'interrupted'].includes(turn.outcome.kind) ? turn.outcome.kind : 'other';
}

/** The timeline of one session's view (`node`); `load()` reads it, `add(events)` takes the
 * stream's, `stop()` ends its timer. */
export class TimelineChart {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.model = new TimelineModel();
    this.memory = new EventMemory(1, 10_000); // this session's turn starts, for the summaries
    this.anchor = null; // the key of the newest turn shown; null: the newest turns
    this.loaded = false;
    this.pending = []; // the stream's events while the first page is read (taken after it)
    this.reading = false;
    this.drawTimer = null;
    this.drawnAt = -Infinity; // when it was last drawn (`performance.now()`)
    this.drawn = null; // what the last drawing placed: `{fromMs, toMs, running}` (for `grow`)
    this.current = null; // the key of the item Tab reaches (one stop for the whole chart)
    this.items = svg('g', { class: 'items' });
    this.axis = svg('g', { class: 'axis' });
    this.plot = svg('svg', {
      viewBox: `0 0 ${PLOT.width} ${PLOT.height}`, role: 'group',
      'aria-label': 'Timeline of the turns and marks shown (← → move between them)',
    }, this.axis, this.items);
    this.plot.addEventListener('keydown', (event) => this.key(event));
    const show = (event) => { // the summary of the turn or mark under the pointer or focused
      const item = event.target.closest && event.target.closest('g[data-key]');
      if (!item) return;
      this.detail.textContent = item.getAttribute('aria-label');
      if (event.type === 'focusin') this.current = item.dataset.key;
    };
    this.plot.addEventListener('focusin', show);
    this.plot.addEventListener('mouseover', show);
    this.caption = el('span', { class: 'muted' });
    this.detail = el('p', { class: 'timeline-detail', 'aria-live': 'polite' }, HINT);
    this.earlierButton = el('button', { type: 'button', disabled: true, onclick: () => this.earlier() }, '← Earlier');
    this.laterButton = el('button', { type: 'button', disabled: true, onclick: () => this.later() }, 'Later →');
    this.node = el('figure', { class: 'timeline', id: 'session-timeline' },
      el('figcaption', {}, el('strong', {}, 'Timeline '), this.caption, ' ', this.earlierButton, ' ', this.laterButton),
      this.plot, this.detail);
    this.timer = setInterval(() => this.grow(), GROW_MS);
  }

  /** Read the newest page of the session's timeline events; its `latest_seq` (the stream
   * follows from it: later events come by `add`). */
  async load() {
    const page = await getJSON('api/events', {
      session_id: this.sessionId, type: TIMELINE_TYPES, before_seq: NEWEST, limit: PAGE,
    });
    this.take(page);
    this.loaded = true;
    const pending = this.pending;
    this.pending = [];
    this.add(pending); // (those the page holds already are passed over)
    this.draw();
    performance.mark('session-timeline-drawn');
    return page.latest_seq;
  }

  take(page) {
    this.memory.remember(page.events);
    this.model.add(page.events);
    const more = !(page.events.length < PAGE || page.next_before_seq <= page.pruned_through + 1);
    this.model.hasOlder = more || this.model.dropped;
  }

  /** Whether the model holds all it may (older events are then not read). */
  full() {
    return this.model.events.length >= this.model.maxEvents;
  }

  /** The stream's events (of any session: this one's timeline events are taken; those older
   * than the oldest held, when older ones are stored, wait for Earlier). */
  add(events) {
    const own = events.filter((event) => event.session_id === this.sessionId
      && TIMELINE_TYPES.includes(event.event && event.event.type));
    if (!own.length) return;
    if (!this.loaded) {
      this.pending.push(...own);
      if (this.pending.length > PAGE) this.pending.splice(0, this.pending.length - PAGE);
      return;
    }
    const oldest = this.model.oldestSeq();
    const taken = this.model.hasOlder && oldest !== null ? own.filter((event) => event.seq > oldest) : own;
    this.memory.remember(taken);
    if (this.model.add(taken) && this.drawTimer === null) {
      const wait = Math.max(0, this.drawnAt + DRAW_MS - performance.now());
      this.drawTimer = setTimeout(() => this.draw(), wait);
    }
  }

  /** How many turns are newer than those shown (0: the newest are). */
  back() {
    if (this.anchor === null) return 0;
    const { turns } = this.model.parts();
    const at = turns.findIndex((turn) => turn.key === this.anchor);
    if (at < 0) { // dropped at the bound: show the newest again
      this.anchor = null;
      return 0;
    }
    return turns.length - 1 - at;
  }

  /** Show the turns that end `back` turns before the newest (held where they are when newer
   * turns arrive). */
  showBack(back) {
    const { turns } = this.model.parts();
    this.anchor = back > 0 && back < turns.length ? turns[turns.length - 1 - back].key : null;
  }

  /** Show the `SHOWN_TURNS` turns before those shown, reading older events when they are not
   * held yet. */
  async earlier() {
    const before = this.model.span(this.now(), this.back());
    if (before.first <= 1 && this.model.hasOlder && !this.reading && !this.full()) {
      this.reading = true;
      this.earlierButton.disabled = true;
      try {
        const page = await getJSON('api/events', {
          session_id: this.sessionId, type: TIMELINE_TYPES, before_seq: this.model.oldestSeq(), limit: PAGE,
        });
        this.take(page);
      } catch (error) {
        this.detail.textContent = `Earlier events could not be read: ${error.message}`;
      } finally {
        this.reading = false;
      }
    }
    // The turns before the first one shown (the older turns read count from the other end).
    const back = before.total - before.first + 1;
    if (back < this.model.parts().turns.length) this.showBack(back);
    this.draw();
  }

  later() {
    this.showBack(Math.max(0, this.back() - SHOWN_TURNS));
    this.draw();
  }

  /** The time a running turn reaches: the browser's clock, and never before the newest event
   * held (a browser whose clock is behind the server's). */
  now() {
    const newest = this.model.events.at(-1);
    return Math.max(Date.now(), newest ? newest.recorded_at_ms : -Infinity);
  }

  /** A running turn's bar grows with the clock (only at the newest turns, while shown): its
   * width and words change in place (no node is made again, the focus stays) until it
   * reaches the span's end; then the whole timeline is drawn again on a longer span. */
  grow() {
    if (!this.loaded || this.anchor !== null || document.visibilityState !== 'visible') return;
    const drawn = this.drawn;
    if (!drawn || !drawn.running) return;
    const now = this.now();
    if (now > drawn.toMs) {
      this.draw();
      return;
    }
    const node = this.items.querySelector('g.turn.running');
    if (!node) return;
    const rect = node.querySelector('rect');
    const x = Number(rect.getAttribute('x'));
    const right = ((now - drawn.fromMs) / (drawn.toMs - drawn.fromMs)) * PLOT.width;
    const width = Math.max(2, right - x).toFixed(1);
    rect.setAttribute('width', width);
    node.dataset.width = width;
    const summary = this.summary(drawn.running, now);
    node.setAttribute('aria-label', summary);
    node.querySelector('title').textContent = summary;
  }

  draw() {
    clearTimeout(this.drawTimer);
    this.drawTimer = null;
    this.drawnAt = performance.now();
    const now = this.now();
    const { turns } = this.model.parts();
    const running = this.anchor === null && turns.length && turns.at(-1).running ? turns.at(-1) : null;
    // A running turn's span reaches a little past now, so that its bar grows in place.
    const reach = running ? now + Math.max(30_000, (now - (running.startMs ?? now)) / 4) : now;
    const span = this.model.span(reach, this.back());
    const placed = layout(span, PLOT.width);
    const zone = timeZone();
    const nodes = [];
    for (const bar of placed.bars) {
      const { turn } = bar;
      const summary = this.summary(turn, now);
      const kind = outcomeClass(turn);
      const width = turn.running ? Math.max(2, ((now - span.fromMs) / (span.toMs - span.fromMs)) * PLOT.width - bar.x) : bar.width;
      const node = svg('g', {
        class: `turn ${kind}`, role: 'img', 'aria-label': summary,
        'data-key': `t${turn.key}`, 'data-seq': (turn.end || turn.start).seq, 'data-x': bar.x.toFixed(1),
        'data-width': width.toFixed(1),
      },
      svg('title', {}, summary),
      svg('rect', { x: bar.x.toFixed(1), y: PLOT.barY, width: width.toFixed(1), height: PLOT.barHeight, rx: 2 }));
      if (ALERTS.includes(kind)) { // marked by a sign, not by colour alone
        node.append(svg('text', { x: (bar.x + 2).toFixed(1), y: PLOT.barY + 14, class: 'sign' }, '!'));
      }
      nodes.push(node);
    }
    for (const { x, mark } of placed.marks) {
      const { text, alert } = summarize(mark.event, this.memory);
      const words = mark.kind === 'unstarted' ? `never started · ${text}` : text;
      const summary = `${formatTime(mark.ms, zone)} · ${words}`;
      const at = Number(x.toFixed(1));
      nodes.push(svg('g', {
        class: `mark ${mark.kind}${alert ? ' alert' : ''}`, role: 'img', 'aria-label': summary,
        'data-key': `m${mark.event.seq}`, 'data-seq': mark.event.seq, 'data-x': x.toFixed(1),
      },
      svg('title', {}, summary),
      (SHAPES[mark.kind] || SHAPES.activity)(at, PLOT.markY),
      alert ? svg('text', { x: at + 7, y: PLOT.markY - 4, class: 'sign' }, '!') : null));
    }
    nodes.sort((a, b) => Number(a.dataset.x) - Number(b.dataset.x));
    // One Tab stop: the item focused last, else the newest; ← → move between them.
    const focused = this.plot.contains(document.activeElement) ? document.activeElement.dataset.key : null;
    const current = nodes.find((node) => node.dataset.key === this.current) || nodes.at(-1);
    for (const node of nodes) node.setAttribute('tabindex', node === current ? 0 : -1);
    this.items.replaceChildren(...nodes);
    this.axis.replaceChildren(
      svg('line', { x1: 0, x2: PLOT.width, y1: PLOT.axisY - 8, y2: PLOT.axisY - 8 }),
      ...placed.ticks.map((tick, index) => svg('text', {
        x: tick.x.toFixed(1), y: PLOT.axisY + 8,
        'text-anchor': index === 0 ? 'start' : index === placed.ticks.length - 1 ? 'end' : 'middle',
      }, formatTime(tick.ms, zone))));
    if (focused && current && current.dataset.key === focused) current.focus({ preventScroll: true });
    this.caption.textContent = span.total
      ? `· turns ${span.first.toLocaleString('en')} to ${span.last.toLocaleString('en')} of the ${span.total.toLocaleString('en')} held${this.model.hasOlder ? ' (older ones stored)' : ''}`
      : `· no turns yet${span.marks.length ? `; ${span.marks.length} marks` : ''}`;
    this.earlierButton.disabled = this.reading || !span.earlier || (span.first <= 1 && this.full());
    this.laterButton.disabled = !span.later;
    this.plot.dataset.from = String(Math.round(span.fromMs));
    this.plot.dataset.to = String(Math.round(span.toMs));
    this.drawn = { fromMs: span.fromMs, toMs: span.toMs, running: running && span.turns.includes(running) ? running : null };
  }

  summary(turn, now) {
    const zone = timeZone();
    const started = turn.startMs === null ? 'start not held' : formatTime(turn.startMs, zone);
    if (turn.running) {
      const lasted = Math.max(0, Math.round((now - turn.startMs) / 1000));
      return `${started} · turn ${turn.id} running · for ${lasted} s so far`;
    }
    if (!turn.end) return `${started} · turn ${turn.id} started · its end was not seen`;
    return `${started} · ${summarize(turn.end, this.memory).text}`;
  }

  /** ← → move the focus between the turns and marks in time order; Home and End to the first
   * and the last. */
  key(event) {
    const nodes = [...this.items.children];
    if (!nodes.length || !['ArrowLeft', 'ArrowRight', 'Home', 'End'].includes(event.key)) return;
    const at = nodes.indexOf(document.activeElement);
    let next;
    if (event.key === 'Home') next = 0;
    else if (event.key === 'End') next = nodes.length - 1;
    else if (at < 0) next = event.key === 'ArrowLeft' ? nodes.length - 1 : 0;
    else next = Math.min(nodes.length - 1, Math.max(0, at + (event.key === 'ArrowLeft' ? -1 : 1)));
    event.preventDefault();
    for (const node of nodes) node.setAttribute('tabindex', node === nodes[next] ? 0 : -1);
    nodes[next].focus({ preventScroll: true });
  }

  stop() {
    clearInterval(this.timer);
    clearTimeout(this.drawTimer);
  }
}
