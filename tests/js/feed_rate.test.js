// The feed's rate chart (page/feed.js) with the feed's own reads: the stream follows from the
// lower of the two, events streamed while they are read are counted, the latest read wins.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { answer, requests } from './page_shim.js';

const { FeedView } = await import('../../src/session_journal/web/page/feed.js');

const MINUTE = 60_000;
const NOW = Date.now();
const START = Math.floor(NOW / MINUTE) * MINUTE - 14 * MINUTE;
const rate = (asOf) => ({
  workspace_id: null, as_of_seq: asOf, as_of_ms: NOW, start_ms: START,
  counts: new Array(15).fill(0), minute_ms: MINUTE,
});
const page = (latest) => ({ events: [], latest_seq: latest, next_before_seq: 1, pruned_through: 0 });
const event = (seq, session = 's-2') => ({
  seq, session_id: session, recorded_at_ms: NOW,
  event: { type: 'session_fault', data: { reason: 'startup_failed', message: 'm', command_id: null } },
});
const app = { run: (promise) => promise, navigate: () => {} };
const charted = (view) => view.rate.series.counts.reduce((sum, count) => sum + count, 0);

test('the stream follows from the lower of the two reads, so the chart misses nothing', async () => {
  const view = new FeedView(app, new URLSearchParams());
  const loading = view.load();
  await answer('api/events/rate', rate(10));
  await answer('api/events?', page(12));
  assert.equal(await loading, 10);
  view.onEvents([event(11), event(12), event(13)]); // the stream, after seq 10
  assert.equal(charted(view), 3);
});

test('events streamed while the rate is read are counted once it is (those above its as_of_seq)', async () => {
  const view = new FeedView(app, new URLSearchParams({ session: 's-1' })); // the chart ignores filters
  const loading = view.load();
  view.onEvents([event(10), event(11)]);
  await answer('api/events/rate', rate(10));
  await answer('api/events?', page(11));
  await loading;
  assert.equal(charted(view), 1);
});

test('two reads at once: the later one wins, whichever answers last', async () => {
  const view = new FeedView(app, new URLSearchParams());
  const first = view.load();
  const second = view.load();
  const rates = requests.filter((request) => request.url.includes('api/events/rate'));
  rates[1].answer(rate(12));
  requests.splice(requests.indexOf(rates[1]), 1);
  await new Promise((resolve) => setTimeout(resolve, 1));
  rates[0].answer(rate(10)); // the older read, answering last
  requests.splice(requests.indexOf(rates[0]), 1);
  await answer('api/events?', page(12));
  await answer('api/events?', page(12));
  await Promise.all([first, second]);
  assert.equal(view.rate.series.asOfSeq, 12);
  view.onEvents([event(13)]);
  assert.equal(charted(view), 1);
});
