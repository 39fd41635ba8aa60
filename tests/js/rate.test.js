// The feed's event rate (page/rate.js): the server's minutes, then the stream's events.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { bars, RateSeries } from '../../src/session_journal/web/page/rate.js';

const MINUTE = 60_000;
const START = 1_800_000_000_000 - (1_800_000_000_000 % MINUTE); // a whole minute
const served = (counts, asOfSeq = 10) => ({ start_ms: START, counts, minute_ms: MINUTE, as_of_seq: asOfSeq });
const event = (seq, at) => ({ seq, recorded_at_ms: at });
const NOW = START + 2 * MINUTE + 5_000; // in the window's last minute

test("the stream's events above as_of_seq are counted in their minute", () => {
  const series = new RateSeries(served([1, 2, 3]));
  series.add([event(9, START + 2 * MINUTE), event(10, START + MINUTE), event(11, START + 2 * MINUTE + 1), event(12, START + 10)], NOW);
  assert.deepEqual(series.counts, [2, 2, 4]);
  assert.equal(series.asOfSeq, 12);
  series.add([event(12, START + 10)], NOW); // the same event again (a second tab's batch): once
  assert.deepEqual(series.counts, [2, 2, 4]);
});

test('when a minute goes by the window moves: the oldest minute drops, the new one starts at 0', () => {
  const series = new RateSeries(served([1, 2, 3]));
  series.add([event(11, START + 3 * MINUTE + 1)], START + 3 * MINUTE + 2);
  assert.equal(series.startMs, START + MINUTE);
  assert.deepEqual(series.counts, [2, 3, 1]);
  series.advance(START + 10 * MINUTE); // longer than the window: every minute empty
  assert.deepEqual(series.counts, [0, 0, 0]);
  assert.equal(series.startMs, START + 8 * MINUTE);
  series.advance(START); // never backwards (a clock set back)
  assert.equal(series.startMs, START + 8 * MINUTE);
});

test('events outside the window are not counted', () => {
  const series = new RateSeries(served([0, 0, 0]));
  series.add([event(11, START - 1), event(12, START + 3 * MINUTE + 5)], NOW);
  assert.deepEqual(series.counts, [0, 0, 0]);
  assert.deepEqual(series.minutes().map((minute) => minute.startMs), [START, START + MINUTE, START + 2 * MINUTE]);
});

test('bars scale to the tallest; an empty window draws none', () => {
  const { top, bars: drawn } = bars([0, 5, 10], 30, 20, 2);
  assert.equal(top, 10);
  assert.deepEqual(drawn, [
    { x: 1, y: 20, width: 8, height: 0 },
    { x: 11, y: 10, width: 8, height: 10 },
    { x: 21, y: 0, width: 8, height: 20 },
  ]);
  assert.deepEqual(bars([0, 0], 10, 10).bars.map((bar) => bar.height), [0, 0]);
});
