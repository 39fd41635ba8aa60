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
    this.back = 0; // turns between the newest and the last one shown
    this.loaded = false;
    this.pending = []; // the stream's events while the first page is read (taken after it)
    this.reading = false;
    this.drawTimer = null;
    this.drawnAt = -Infinity; // when it was last drawn (`performance.now()`)
    this.items = svg('g', { class: 'items' });
    this.axis = svg('g', { class: 'axis' });
    this.plot = svg('svg', {
      viewBox: `0 0 ${PLOT.width} ${PLOT.height}`, role: 'group',
      'aria-label': 'Timeline of the turns and marks shown (← → move between them)',
    }, this.axis, this.items);
    this.plot.addEventListener('keydown', (event) => this.key(event));
    const show = (event) => { // the summary of the turn or mark under the pointer or focused
      const item = event.target.closest && event.target.closest('g[data-key]');
      if (item) this.detail.textContent = item.getAttribute('aria-label');
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
    this.memory.remember(pending);
    this.model.add(pending); // (those the page holds already are passed over)
    this.draw();
    performance.mark('session-timeline-drawn');
    return page.latest_seq;
  }

  take(page) {
    this.memory.remember(page.events);
    this.model.add(page.events);
    this.model.hasOlder = !(page.events.length < PAGE || page.next_before_seq <= page.pruned_through + 1);
  }

  /** Whether the model holds all it may (older events are then not read). */
  full() {
    return this.model.events.length >= this.model.maxEvents;
  }

  /** The stream's events (of any session: this one's are taken). */
  add(events) {
    const own = events.filter((event) => event.session_id === this.sessionId);
    if (!own.length) return;
    if (!this.loaded) {
      this.pending.push(...own);
      if (this.pending.length > PAGE) this.pending.splice(0, this.pending.length - PAGE);
      return;
    }
    this.memory.remember(own);
    if (this.model.add(own) && this.drawTimer === null) {
      const wait = Math.max(0, this.drawnAt + DRAW_MS - performance.now());
      this.drawTimer = setTimeout(() => this.draw(), wait);
    }
  }

  /** Show the `SHOWN_TURNS` turns before those shown, reading older events when they are not
   * held yet. */
  async earlier() {
    let span = this.model.span(Date.now(), this.back);
    if (span.first <= 1 && this.model.hasOlder && !this.reading && !this.full()) {
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
      span = this.model.span(Date.now(), this.back); // the same turns, with older ones before
    }
    if (span.first > 1) this.back += span.last - span.first + 1;
    this.draw();
  }

  later() {
    this.back = Math.max(0, this.back - SHOWN_TURNS);
    this.draw();
  }

  /** A running turn's bar grows with the clock (only at the newest turns, while shown). */
  grow() {
    if (!this.loaded || this.back !== 0 || document.visibilityState !== 'visible') return;
    const { turns } = this.model.parts();
    if (turns.length && turns.at(-1).running) this.draw();
  }

  draw() {
    clearTimeout(this.drawTimer);
    this.drawTimer = null;
    this.drawnAt = performance.now();
    const now = Date.now();
    const span = this.model.span(now, this.back);
    const placed = layout(span, PLOT.width);
    const zone = timeZone();
    const focused = this.plot.querySelector(':focus');
    const focusedKey = focused ? focused.dataset.key : null;
    const nodes = [];
    for (const bar of placed.bars) {
      const { turn } = bar;
      const event = turn.end || turn.start;
      const summary = this.summary(turn);
      const kind = outcomeClass(turn);
      const node = svg('g', {
        class: `turn ${kind}`, tabindex: 0, role: 'img', 'aria-label': summary,
        'data-key': `t${event.seq}`, 'data-seq': event.seq, 'data-x': bar.x.toFixed(1),
        'data-width': bar.width.toFixed(1),
      },
      svg('title', {}, summary),
      svg('rect', { x: bar.x.toFixed(1), y: PLOT.barY, width: bar.width.toFixed(1), height: PLOT.barHeight, rx: 2 }));
      if (kind === 'failed') { // marked by a sign, not by colour alone
        node.append(svg('text', { x: (bar.x + 2).toFixed(1), y: PLOT.barY + 14, class: 'sign' }, '!'));
      }
      nodes.push(node);
    }
    for (const { x, mark } of placed.marks) {
      const { text, alert } = summarize(mark.event, this.memory);
      const summary = `${formatTime(mark.ms, zone)} · ${text}`;
      nodes.push(svg('g', {
        class: `mark ${mark.kind}${alert ? ' alert' : ''}`, tabindex: 0, role: 'img', 'aria-label': summary,
        'data-key': `m${mark.event.seq}`, 'data-seq': mark.event.seq, 'data-x': x.toFixed(1),
      },
      svg('title', {}, summary),
      svg('path', { d: `M ${x.toFixed(1)} ${PLOT.markY - 6} l 6 6 l -6 6 l -6 -6 z` }),
      alert ? svg('text', { x: (x - 2).toFixed(1), y: PLOT.markY + 4, class: 'sign' }, '!') : null));
    }
    nodes.sort((a, b) => Number(a.dataset.x) - Number(b.dataset.x));
    this.items.replaceChildren(...nodes);
    this.axis.replaceChildren(
      svg('line', { x1: 0, x2: PLOT.width, y1: PLOT.axisY - 8, y2: PLOT.axisY - 8 }),
      ...placed.ticks.map((tick, index) => svg('text', {
        x: tick.x.toFixed(1), y: PLOT.axisY + 8,
        'text-anchor': index === 0 ? 'start' : index === placed.ticks.length - 1 ? 'end' : 'middle',
      }, formatTime(tick.ms, zone))));
    if (focusedKey) { // the focus stays on its turn or mark across drawings
      const again = nodes.find((node) => node.dataset.key === focusedKey);
      if (again) again.focus();
    }
    this.caption.textContent = span.total
      ? `· turns ${span.first.toLocaleString('en')} to ${span.last.toLocaleString('en')} of the ${span.total.toLocaleString('en')} held${this.model.hasOlder ? ' (older ones stored)' : ''}`
      : `· no turns yet${span.marks.length ? `; ${span.marks.length} marks` : ''}`;
    this.earlierButton.disabled = this.reading || !span.earlier || (span.first <= 1 && this.full());
    this.laterButton.disabled = !span.later;
    this.plot.dataset.from = String(Math.round(span.fromMs));
    this.plot.dataset.to = String(Math.round(span.toMs));
  }

  summary(turn) {
    const zone = timeZone();
    const started = turn.startMs === null ? 'start not held' : formatTime(turn.startMs, zone);
    if (turn.running) {
      const lasted = Math.max(0, Math.round((Date.now() - turn.startMs) / 1000));
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
    nodes[next].focus();
  }

  stop() {
    clearInterval(this.timer);
    clearTimeout(this.drawTimer);
  }
}
