// Times on the page (page/time.js): one format, the zone shown.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { duration, formatTime, relativeTime, toMs, zoneName } from '../../src/session_journal/web/page/time.js';

const AT = Date.UTC(2026, 11, 7, 18, 20, 31, 45); // 2026-12-07 18:20:31.045 UTC

/** Run `body` with the process's zone set to `zone` (Node reads TZ again when it changes). */
function inZone(zone, body) {
  const before = process.env.TZ;
  process.env.TZ = zone;
  try {
    body();
  } finally {
    if (before === undefined) delete process.env.TZ;
    else process.env.TZ = before;
  }
}

test('UTC: the time and the zone, milliseconds on request', () => {
  assert.equal(formatTime(AT, 'utc'), '2026-12-07 18:20:31 UTC');
  assert.equal(formatTime(AT, 'utc', true), '2026-12-07 18:20:31.045 UTC');
});

test("local: the browser's zone as an offset from UTC, daylight saving included", () => {
  inZone('Asia/Kolkata', () => assert.equal(formatTime(AT, 'local'), '2026-12-07 23:50:31 UTC+05:30'));
  inZone('America/New_York', () => {
    assert.equal(formatTime(AT, 'local'), '2026-12-07 13:20:31 UTC-05:00');
    assert.equal(formatTime(Date.UTC(2026, 6, 1, 12), 'local'), '2026-07-01 08:00:00 UTC-04:00');
  });
  inZone('UTC', () => assert.equal(formatTime(AT, 'local'), '2026-12-07 18:20:31 UTC'));
});

test('a value that is no time formats as nothing', () => {
  for (const value of [null, undefined, '', NaN, 'later', 8.64e15 + 1]) {
    assert.equal(formatTime(value, 'utc'), '', String(value));
    assert.equal(relativeTime(value, AT), '', String(value));
  }
});

test('zone names', () => {
  assert.deepEqual([0, 60, -300, 330, -570].map(zoneName), ['UTC', 'UTC+01:00', 'UTC-05:00', 'UTC+05:30', 'UTC-09:30']);
});

test('relative times in the largest whole unit', () => {
  const cases = [[0, 'just now'], [400, 'just now'], [41_000, '41 s ago'], [59_400, '59 s ago'],
    [60_000, '1 min ago'], [3_599_000, '59 min ago'], [3_600_000, '1 h ago'],
    [86_400_000 * 2 + 5, '2 d ago'], [-3_000, 'in 3 s']];
  for (const [ago, text] of cases) assert.equal(relativeTime(AT - ago, AT), text, String(ago));
});

test('durations', () => {
  const cases = [[850, '850 ms'], [999.6, '1 s'], [41_000, '41 s'], [200_000, '3 min 20 s'], [180_000, '3 min'],
    [7_500_000, '2 h 5 min'], [7_200_000, '2 h'], [-1, ''], [NaN, '']];
  for (const [ms, text] of cases) assert.equal(duration(ms), text, String(ms));
});

test('ISO text and milliseconds are both times', () => {
  assert.equal(toMs('2026-12-07T18:20:31.045Z'), AT);
  assert.equal(toMs(AT), AT);
  assert.ok(Number.isNaN(toMs('never')));
});
