// A session's timeline: its turns as bars from their start to their end, and its questions,
// answers, faults, commands (checkpoint operations among them) and activity changes as marks,
// on one time axis. Pure: the caller gives the events and the time; the chart (views.js) draws
// what `span` and `layout` say.

/** The event types the timeline reads (`GET api/events?type=...`). */
export const TIMELINE_TYPES = [
  'turn_started', 'turn_ended', 'input_required', 'input_resolved', 'session_fault',
  'command_ended', 'activity_changed',
];

/** How many turns the timeline shows at once (the newest, then "Earlier" by as many). */
export const SHOWN_TURNS = 50;

const MARKS = {
  input_required: 'question',
  input_resolved: 'answer',
  session_fault: 'fault',
  command_ended: 'command',
  activity_changed: 'activity',
};
const MIN_SPAN_MS = 60_000; // a span shorter than this is widened, centred on what it holds
const MAX_MARKS = 200; // marks of a span without turns: the newest

const bySeq = (a, b) => a.seq - b.seq;

function turnStartMs(event) {
  const at = event.event.data.started_at_ms;
  return Number.isFinite(at) ? at : event.recorded_at_ms;
}

/** The events of one session the timeline holds, by seq, at most `maxEvents` (the oldest go
 * first; `hasOlder` then says more are stored). */
export class TimelineModel {
  constructor(maxEvents = 10_000) {
    this.maxEvents = maxEvents;
    this.events = []; // by seq, each once
    this.seqs = new Set();
    this.hasOlder = false; // the server holds events older than the oldest here
    this.dropped = false; // events were dropped at the bound (older ones are then stored)
    this.cache = null; // the turns and marks of `events`, until they change
  }

  /** Take `events` (any order; those held already, and of other types, are passed over);
   * whether any was new. */
  add(events) {
    const fresh = events.filter((event) => !this.seqs.has(event.seq)
      && TIMELINE_TYPES.includes(event.event && event.event.type));
    if (!fresh.length) return false;
    for (const event of fresh) this.seqs.add(event.seq);
    fresh.sort(bySeq);
    const last = this.events.length ? this.events.at(-1).seq : -Infinity;
    this.events = fresh[0].seq > last ? this.events.concat(fresh) : this.events.concat(fresh).sort(bySeq);
    if (this.events.length > this.maxEvents) {
      for (const event of this.events.splice(0, this.events.length - this.maxEvents)) this.seqs.delete(event.seq);
      this.hasOlder = true;
      this.dropped = true;
    }
    this.cache = null;
    return true;
  }

  /** The oldest seq held (null: none). */
  oldestSeq() {
    return this.events.length ? this.events[0].seq : null;
  }

  /** The turns, in the order they started, and the marks, by seq: a turn is `{id, key,
   * startMs, endMs, outcome, start, end, running}` (`key`: the seq of its first event held;
   * `startMs` null: its start is older than the events held; `endMs` null: no end seen —
   * `running` when it is the newest turn, else it ends where the next one starts, its outcome
   * unknown); a mark `{kind, ms, event}`. The end of a turn that never started (a prompt
   * refused or interrupted while queued) is a mark (`unstarted`), not a bar. */
  parts() {
    if (this.cache) return this.cache;
    const turns = [];
    const open = new Map(); // turn id -> turn, until its end
    const marks = [];
    let started = false; // a turn_started was seen before (in seq order)
    for (const event of this.events) {
      const body = event.event;
      try {
        if (body.type === 'turn_started') {
          const turn = { id: body.data.turn_id, key: event.seq, startMs: turnStartMs(event), endMs: null, outcome: null, start: event, end: null, running: false };
          turns.push(turn);
          open.set(turn.id, turn);
          started = true;
        } else if (body.type === 'turn_ended') {
          const { turn: ended } = body.data;
          const id = ended.accepted_ordinal;
          const turn = id === null || id === undefined ? undefined : open.get(id);
          const outcome = ended.outcome || {};
          if (turn) {
            Object.assign(turn, { endMs: event.recorded_at_ms, outcome, end: event });
            open.delete(id);
          } else if (this.hasOlder && !started && id !== null && id !== undefined) {
            // Its start is older than the events held: a bar from the left edge.
            turns.push({ id, key: event.seq, startMs: null, endMs: event.recorded_at_ms, outcome, start: null, end: event, running: false });
          } else { // never started
            marks.push({ kind: 'unstarted', ms: event.recorded_at_ms, event });
          }
        } else if (Object.hasOwn(MARKS, body.type)) {
          marks.push({ kind: MARKS[body.type], ms: event.recorded_at_ms, event });
        }
      } catch {
        // a body of a shape this page does not know: left out
      }
    }
    turns.forEach((turn, index) => {
      if (turn.endMs !== null) return;
      if (index === turns.length - 1) turn.running = true;
      else turn.endMs = turns[index + 1].startMs ?? turns[index + 1].endMs; // no end seen
    });
    this.cache = { turns, marks };
    return this.cache;
  }

  /** What the timeline shows: the `shown` turns that end `back` turns before the newest, the
   * marks in their time, and whether there is something earlier or later to show; `now` (ms)
   * is where a running turn ends. Without turns, the newest marks. `{fromMs, toMs, turns,
   * marks, earlier, later, first, last}` (`first`, `last`: the turns' numbers, 1 the oldest
   * held). */
  span(now, back = 0, shown = SHOWN_TURNS) {
    const { turns, marks } = this.parts();
    const end = Math.max(0, turns.length - back);
    const begin = Math.max(0, end - shown);
    const visible = turns.slice(begin, end);
    let fromMs = Infinity;
    let toMs = -Infinity;
    for (const turn of visible) {
      const ends = turn.running ? Math.max(now, turn.startMs) : turn.endMs;
      fromMs = Math.min(fromMs, turn.startMs ?? ends, ends);
      toMs = Math.max(toMs, ends, turn.startMs ?? ends);
    }
    let shownMarks;
    if (visible.length) {
      if (back === 0 && marks.length) toMs = Math.max(toMs, marks.at(-1).ms); // what came after
      if (begin === 0 && marks.length && !this.hasOlder) fromMs = Math.min(fromMs, marks[0].ms);
      shownMarks = marks.filter((mark) => mark.ms >= fromMs && mark.ms <= toMs);
    } else {
      shownMarks = marks.slice(-MAX_MARKS);
      for (const mark of shownMarks) {
        fromMs = Math.min(fromMs, mark.ms);
        toMs = Math.max(toMs, mark.ms);
      }
    }
    if (!Number.isFinite(fromMs)) {
      fromMs = now - MIN_SPAN_MS;
      toMs = now;
    }
    if (toMs - fromMs < MIN_SPAN_MS) {
      const middle = (fromMs + toMs) / 2;
      fromMs = middle - MIN_SPAN_MS / 2;
      toMs = middle + MIN_SPAN_MS / 2;
    }
    return {
      fromMs, toMs, turns: visible, marks: shownMarks,
      earlier: begin > 0 || this.hasOlder, later: back > 0,
      first: begin + 1, last: end, total: turns.length,
    };
  }
}

/** Where a span's parts go on a plot `width` wide: bars `{x, width, turn}` (2 wide at least;
 * a turn whose start is not held starts at the plot's left), marks `{x, mark}` and `ticks`
 * `{x, ms}` at `tickCount` even steps. */
export function layout(span, width, tickCount = 5) {
  const scale = width / (span.toMs - span.fromMs);
  const x = (ms) => Math.min(width, Math.max(0, (ms - span.fromMs) * scale));
  return {
    bars: span.turns.map((turn) => {
      const left = turn.startMs === null ? 0 : x(turn.startMs);
      const right = x(turn.endMs === null ? span.toMs : turn.endMs);
      return { x: left, width: Math.max(2, right - left), turn };
    }),
    marks: span.marks.map((mark) => ({ x: x(mark.ms), mark })),
    ticks: Array.from({ length: tickCount }, (_, index) => {
      const ms = span.fromMs + ((span.toMs - span.fromMs) * index) / (tickCount - 1);
      return { x: x(ms), ms };
    }),
  };
}
