// A tab's cursor (page/gap.js): batches applied in order, gaps read as pages, nothing twice.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { FILL_LIMIT, GapFiller } from '../../src/session_journal/web/page/gap.js';

const event = (seq) => ({ seq, session_id: 's', recorded_at_ms: seq, event: { type: 'turn_started', data: {} } });
const seqs = (from, to) => Array.from({ length: to - from + 1 }, (_, index) => event(from + index));

/** A log of `latest` events served as `GET api/events` pages (`limit` at most `pageSize`). */
function served(latest, pageSize = 3) {
  const reads = [];
  const readPage = async (after, limit) => {
    reads.push(after);
    const events = seqs(after + 1, Math.min(latest, after + Math.min(limit, pageSize)));
    return { events, next_after_seq: events.length ? events.at(-1).seq : latest, latest_seq: latest };
  };
  return { reads, readPage };
}

function recorder() {
  const calls = [];
  return {
    calls,
    handlers: {
      events: (list) => calls.push(['events', list.map((item) => item.seq)]),
      reset: () => calls.push(['reset']),
      expired: (problem) => calls.push(['expired', problem.code]),
      unauthorized: () => calls.push(['unauthorized']),
    },
  };
}

test('a batch right after the cursor is applied as it is', async () => {
  const { calls, handlers } = recorder();
  const gap = new GapFiller(served(0).readPage, handlers);
  gap.cursor = 4;
  await gap.take({ after: 4, events: seqs(5, 6) });
  assert.deepEqual(calls, [['events', [5, 6]]]);
  assert.equal(gap.cursor, 6);
});

test('the gap before a batch is read in pages first, then the batch', async () => {
  const { calls, handlers } = recorder();
  const log = served(10);
  const gap = new GapFiller(log.readPage, handlers);
  gap.cursor = 2;
  await gap.take({ after: 8, events: seqs(9, 10) });
  assert.deepEqual(log.reads, [2, 5]);
  assert.deepEqual(calls, [['events', [3, 4, 5]], ['events', [6, 7, 8]], ['events', [9, 10]]]);
  assert.equal(gap.cursor, 10);
});

test('events at or below the cursor are never applied twice (a reconnect, a new leader)', async () => {
  const { calls, handlers } = recorder();
  const gap = new GapFiller(served(0).readPage, handlers);
  gap.cursor = 6;
  await gap.take({ after: 3, events: seqs(4, 8) });
  await gap.take({ after: 5, events: seqs(6, 7) });
  assert.deepEqual(calls, [['events', [7, 8]]]);
});

test('batches are applied in the order taken, though the first waits for its gap', async () => {
  const { calls, handlers } = recorder();
  const gap = new GapFiller(served(4).readPage, handlers);
  gap.cursor = 0;
  gap.take({ after: 4, events: seqs(5, 5) });
  await gap.take({ after: 5, events: seqs(6, 6) });
  assert.deepEqual(calls, [['events', [1, 2, 3]], ['events', [4]], ['events', [5]], ['events', [6]]]);
});

test('the first batch sets an unknown cursor', async () => {
  const { calls, handlers } = recorder();
  const gap = new GapFiller(served(0).readPage, handlers);
  await gap.take({ after: 41, events: seqs(42, 42) });
  assert.deepEqual(calls, [['events', [42]]]);
});

test('a gap longer than the fill limit resets the views instead of reading it', async () => {
  const { calls, handlers } = recorder();
  const log = served(FILL_LIMIT + 10);
  const gap = new GapFiller(log.readPage, handlers);
  gap.cursor = 0;
  await gap.take({ after: FILL_LIMIT + 1, events: seqs(FILL_LIMIT + 2, FILL_LIMIT + 3) });
  assert.deepEqual(log.reads, []);
  assert.deepEqual(calls, [['reset']]);
  assert.equal(gap.cursor, FILL_LIMIT + 3);
});

test('a gap whose events were deleted ends when a page no longer moves the cursor', async () => {
  const { calls, handlers } = recorder();
  const reads = [];
  const readPage = async (after) => {
    reads.push(after);
    return { events: [], next_after_seq: after, latest_seq: 9 };
  };
  const gap = new GapFiller(readPage, handlers);
  gap.cursor = 2;
  await gap.take({ after: 8, events: seqs(9, 9) });
  assert.deepEqual(reads, [2]);
  assert.deepEqual(calls, [['events', [9]]]);
});

test('an empty page that moves the cursor (a filtered scan) is read past', async () => {
  const { calls, handlers } = recorder();
  const pages = [{ events: [], next_after_seq: 5 }, { events: seqs(7, 7), next_after_seq: 8 }];
  const gap = new GapFiller(async () => pages.shift(), handlers);
  gap.cursor = 0;
  await gap.take({ after: 8, events: seqs(9, 9) });
  assert.deepEqual(calls, [['events', [7]], ['events', [9]]]);
});

test('a pruned gap (410) is an expiry, a refused token (401) a sign-out, anything else a reset', async () => {
  for (const [error, call] of [
    [{ status: 410, problem: { code: 'cursor_expired' } }, ['expired', 'cursor_expired']],
    [{ status: 401, problem: {} }, ['unauthorized']],
    [new Error('the server did not answer'), ['reset']],
  ]) {
    const { calls, handlers } = recorder();
    const gap = new GapFiller(async () => { throw error; }, handlers);
    gap.cursor = 1;
    await gap.take({ after: 5, events: seqs(6, 6) });
    assert.deepEqual(calls, [call]);
  }
});

test('moveTo waits for the batches before it, then moves the cursor and calls back', async () => {
  const { calls, handlers } = recorder();
  const gap = new GapFiller(served(0).readPage, handlers);
  gap.cursor = 1;
  gap.take({ after: 1, events: seqs(2, 3) });
  await gap.moveTo(100, () => calls.push(['moved', gap.cursor]));
  await gap.take({ after: 99, events: seqs(100, 101) });
  assert.deepEqual(calls, [['events', [2, 3]], ['moved', 100], ['events', [101]]]);
});
