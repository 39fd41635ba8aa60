// The feed's live rows (page/feed.js): drawn at once after a quiet spell, then at most once a
// second (a burst is one change of the table); Pause draws what came before it; a Load older
// that drops the newest rows leaves nothing queued to draw above them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { answer } from './page_shim.js';

const { FeedView } = await import('../../src/session_journal/web/page/feed.js');

const NOW = Date.now();
const event = (seq) => ({
  seq, session_id: 's-1', recorded_at_ms: NOW,
  event: { type: 'session_fault', data: { reason: 'startup_failed', message: `m${seq}`, command_id: null } },
});
const page = (seqs, latest) => ({
  events: seqs.map(event), latest_seq: latest, next_before_seq: seqs.length ? seqs[0] : 1, pruned_through: 0,
});
const app = { run: (promise) => promise, navigate: () => {} };
const shown = (view) => view.rows.children.map((row) => Number(row.dataset.seq));
const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function loaded(seqs, latest) {
  const view = new FeedView(app, new URLSearchParams({ session: 's-1' }), true); // no rate chart
  const loading = view.load();
  await answer('api/events?', page(seqs, latest));
  await loading;
  return view;
}

test('after a quiet spell a live row is drawn at once; a burst after it waits for the second', async () => {
  const view = await loaded([2, 1], 2);
  view.onEvents([event(3)]);
  await wait(5);
  assert.deepEqual(shown(view), [3, 2, 1]);
  view.onEvents([event(4)]);
  view.onEvents([event(5), event(6)]);
  await wait(5);
  assert.deepEqual(shown(view), [3, 2, 1]); // queued: drawn a second after the last drawing
  await wait(1100);
  assert.deepEqual(shown(view), [6, 5, 4, 3, 2, 1]); // newest on top, in one change
  view.stop();
});

test('Pause draws what came before it and nothing after', async () => {
  const view = await loaded([1], 1);
  view.onEvents([event(2)]);
  await wait(5);
  view.onEvents([event(3)]); // queued
  view.togglePause();
  assert.deepEqual(shown(view), [3, 2, 1]);
  view.onEvents([event(4)]);
  await wait(1100);
  assert.deepEqual(shown(view), [3, 2, 1]);
  assert.equal(view.missed, 1);
  view.stop();
});

test('a Load older that drops the newest rows draws no queued row above the hole', async () => {
  const view = await loaded([12, 11, 10], 12);
  view.maxRows = 4;
  view.onEvents([event(13)]);
  await wait(5);
  view.onEvents([event(14)]); // queued
  const older = view.loadOlder();
  await answer('api/events?', page([9, 8, 7], 14));
  await older;
  assert.deepEqual(shown(view), [10, 9, 8, 7]); // the newest dropped
  assert.equal(view.paused, true);
  await wait(1100);
  assert.deepEqual(shown(view), [10, 9, 8, 7]); // 14 was not drawn above the hole
  assert.equal(view.missed, 1);
  view.stop();
});
