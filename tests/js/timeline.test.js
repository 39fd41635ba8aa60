// A session's timeline (page/timeline.js): turns from their start to their end, marks, the span
// shown and where each part goes.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { layout, SHOWN_TURNS, TimelineModel } from '../../src/session_journal/web/page/timeline.js';

const T0 = 1_800_000_000_000;
const S = 1000;
let seq = 0;
const event = (type, data, at) => ({ seq: ++seq, session_id: 's-1', recorded_at_ms: at, event: { type, data } });
const started = (id, at) => event('turn_started', { turn_id: id, command_id: `c-${id}`, started_at_ms: at }, at + 5);
const ended = (id, at, kind = 'completed') => event('turn_ended', {
  turn: { command_id: `c-${id}`, accepted_ordinal: id, outcome: { kind, stop_reason: 'end_turn' } },
}, at);
const fault = (at) => event('session_fault', { reason: 'startup_failed', message: 'x', command_id: null }, at);

test('a turn runs from its start to its end; the newest without an end is running', () => {
  const model = new TimelineModel();
  const events = [started(1, T0), ended(1, T0 + 10 * S), fault(T0 + 12 * S), started(2, T0 + 20 * S)];
  model.add([...events].reverse()); // any order
  const { turns, marks } = model.parts();
  assert.deepEqual(turns.map((t) => [t.id, t.startMs, t.endMs, t.running, t.outcome && t.outcome.kind]), [
    [1, T0, T0 + 10 * S, false, 'completed'],
    [2, T0 + 20 * S, null, true, null],
  ]);
  assert.deepEqual(marks.map((m) => [m.kind, m.ms]), [['fault', T0 + 12 * S]]);
  const span = model.span(T0 + 90 * S);
  assert.equal(span.fromMs, T0);
  assert.equal(span.toMs, T0 + 90 * S); // the running turn reaches now
  assert.equal(span.marks.length, 1);
  assert.equal(model.add(events), false); // held already: nothing new
});

test('a running turn grows with the clock', () => {
  const model = new TimelineModel();
  model.add([started(1, T0)]);
  const first = layout(model.span(T0 + 60 * S), 1000).bars[0];
  const later = layout(model.span(T0 + 120 * S), 1000).bars[0];
  assert.equal(first.x, 0);
  assert.equal(first.width, 1000);
  assert.equal(later.width, 1000);
  assert.equal(model.span(T0 + 120 * S).toMs - model.span(T0 + 60 * S).toMs, 60 * S);
});

test('a turn whose end never came ends where the next one starts; an end whose start is older than those held starts at the left', () => {
  const model = new TimelineModel();
  model.hasOlder = true;
  model.add([ended(7, T0 + 5 * S, 'failed'), started(8, T0 + 10 * S), started(9, T0 + 70 * S), ended(9, T0 + 80 * S)]);
  const { turns } = model.parts();
  assert.deepEqual(turns.map((t) => [t.id, t.startMs, t.endMs, t.running]), [
    [7, null, T0 + 5 * S, false],
    [8, T0 + 10 * S, T0 + 70 * S, false],
    [9, T0 + 70 * S, T0 + 80 * S, false],
  ]);
  const placed = layout(model.span(T0 + 100 * S), 1000);
  assert.equal(placed.bars[0].x, 0);
  assert.ok(placed.bars[0].width >= 2);
});

test('the end of a turn that never started (refused while queued) is a mark, and the running turn runs on', () => {
  const model = new TimelineModel();
  model.add([started(1, T0), ended(2, T0 + 5 * S, 'rejected'), event('turn_ended', {
    turn: { command_id: 'c-x', accepted_ordinal: null, outcome: { kind: 'interrupted' } },
  }, T0 + 6 * S)]);
  const { turns, marks } = model.parts();
  assert.deepEqual(turns.map((t) => [t.id, t.running]), [[1, true]]);
  assert.deepEqual(marks.map((m) => [m.kind, m.ms]), [['unstarted', T0 + 5 * S], ['unstarted', T0 + 6 * S]]);
  const span = model.span(T0 + 60 * S);
  assert.equal(layout(span, 1000).bars[0].width, 1000); // from the start, to now
  assert.equal(span.marks.length, 2);
});

test('of a thousand turns the newest are shown, and earlier ones by steps back', () => {
  const model = new TimelineModel();
  const events = [];
  for (let n = 1; n <= 1000; n += 1) events.push(started(n, T0 + n * 60 * S), ended(n, T0 + n * 60 * S + 30 * S));
  model.add(events);
  const newest = model.span(T0 + 1001 * 60 * S);
  assert.deepEqual([newest.first, newest.last, newest.total, newest.turns.length], [951, 1000, 1000, SHOWN_TURNS]);
  assert.equal(newest.earlier, true);
  assert.equal(newest.later, false);
  const back = model.span(T0, 950);
  assert.deepEqual([back.first, back.last, back.earlier, back.later], [1, 50, false, true]);
  assert.equal(back.fromMs, T0 + 60 * S);
  assert.equal(layout(back, 1000).bars.length, 50);
});

test('marks without turns: the newest, over their own time; an empty timeline spans the last minute', () => {
  const model = new TimelineModel();
  assert.deepEqual(model.span(T0), {
    fromMs: T0 - 60 * S, toMs: T0, turns: [], marks: [], earlier: false, later: false, first: 1, last: 0, total: 0,
  });
  model.add([fault(T0), fault(T0 + 10 * S)]);
  const span = model.span(T0 + 20 * S);
  assert.equal(span.marks.length, 2);
  assert.equal(span.toMs - span.fromMs, 60 * S); // widened around them
  const placed = layout(span, 600);
  assert.ok(placed.marks[0].x < placed.marks[1].x);
  assert.deepEqual(placed.ticks.map((tick) => tick.x), [0, 150, 300, 450, 600]);
});

test('the model holds at most its bound of events, the oldest dropped, and says older ones exist', () => {
  const model = new TimelineModel(4);
  model.add([fault(T0), fault(T0 + S), fault(T0 + 2 * S), fault(T0 + 3 * S), fault(T0 + 4 * S)]);
  assert.equal(model.events.length, 4);
  assert.equal(model.hasOlder, true);
  assert.equal(model.oldestSeq(), model.events[0].seq);
});

test('bodies of other types and of unknown shapes are passed over', () => {
  const model = new TimelineModel();
  model.add([event('agent_text', {}, T0), event('turn_ended', { turn: null }, T0), started(1, T0)]);
  assert.equal(model.parts().turns.length, 1);
});
