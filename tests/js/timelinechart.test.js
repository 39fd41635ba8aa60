// The session's timeline, drawn (page/timelinechart.js): Earlier reads older events when the
// turns held run out, and shows exactly the turns before those shown; the view stays on its
// turns while new ones arrive.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { answer } from './page_shim.js';

const { TimelineChart } = await import('../../src/session_journal/web/page/timelinechart.js');

const T0 = Date.now() - 10_000_000;
const turnEvents = (turn) => [
  { seq: 2 * turn - 1, session_id: 's-1', recorded_at_ms: T0 + turn * 1000, event: { type: 'turn_started', data: { turn_id: turn, command_id: `c-${turn}`, started_at_ms: T0 + turn * 1000 } } },
  { seq: 2 * turn, session_id: 's-1', recorded_at_ms: T0 + turn * 1000 + 500, event: { type: 'turn_ended', data: { turn: { command_id: `c-${turn}`, accepted_ordinal: turn, outcome: { kind: 'completed' } } } } },
];
const turnsPage = (first, last, more) => ({
  events: Array.from({ length: last - first + 1 }, (_, n) => turnEvents(first + n)).flat(),
  latest_seq: 2 * 600, next_before_seq: 2 * first - 1, pruned_through: 0,
  ...(more ? {} : { next_before_seq: 1 }),
});
const shownTurns = (chart) => {
  const span = chart.model.span(Date.now(), chart.back());
  return [span.turns[0].id, span.turns.at(-1).id, span.turns.length];
};

test('Earlier steps back fifty turns at a time, then reads the older ones and shows the fifty before', async () => {
  const chart = new TimelineChart('s-1');
  const loading = chart.load();
  await answer('api/events?', turnsPage(101, 600, true)); // 1,000 events: older ones stored
  await loading;
  assert.deepEqual(shownTurns(chart), [551, 600, 50]);
  for (let step = 0; step < 9; step += 1) await chart.earlier();
  assert.deepEqual(shownTurns(chart), [101, 150, 50]);
  const reading = chart.earlier();
  await answer('before_seq=201', turnsPage(1, 100, false));
  await reading;
  assert.deepEqual(shownTurns(chart), [51, 100, 50]); // none skipped
  assert.equal(chart.model.hasOlder, false);
  chart.later();
  assert.deepEqual(shownTurns(chart), [101, 150, 50]);
  // A new turn arrives: the view stays on its turns.
  chart.add(turnEvents(601).map((event) => ({ ...event, seq: event.seq })));
  assert.deepEqual(shownTurns(chart), [101, 150, 50]);
  chart.stop();
});
