// The shared stream's tab (page/stream.js), in Node with the browser's globals it needs stood
// in for: a tab that has not started ignores the other tabs' messages, then follows from the
// snapshot it starts at, each event once.
import assert from 'node:assert/strict';
import { test } from 'node:test';

const served = [];
globalThis.navigator = { locks: { request: () => new Promise(() => {}) } }; // never the leader
globalThis.document = { visibilityState: 'visible', addEventListener() {} };
globalThis.addEventListener = () => {};
globalThis.setInterval = () => 0; // no announcements: the test's process must end
globalThis.fetch = async (url) => {
  const after = Number(new URL(url).searchParams.get('after_seq'));
  served.push(after);
  const events = [after + 1, after + 2].filter((seq) => seq <= 505).map((seq) => ({ seq }));
  const body = { events, next_after_seq: events.length ? events.at(-1).seq : 505, latest_seq: 505 };
  return new Response(JSON.stringify(body), { status: 200 });
};
const { SharedStream } = await import('../../src/session_journal/web/page/stream.js');

const settle = () => new Promise((resolve) => setTimeout(resolve, 30));

test('before it starts a tab ignores batches; after, it reads its gap and applies each once', async () => {
  const applied = [];
  const handlers = { events: (list) => applied.push(...list.map((event) => event.seq)) };
  for (const name of ['status', 'expired', 'reset', 'unauthorized']) {
    handlers[name] = () => applied.push(name);
  }
  const tab = new SharedStream(60_000, handlers);
  const leader = new BroadcastChannel(tab.name);
  try {
    const seqs = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => ({ seq: from + i }));
    leader.postMessage({ kind: 'batch', after: 500, events: seqs(501, 505) });
    leader.postMessage({ kind: 'expired', problem: { code: 'cursor_expired' } });
    await settle();
    assert.deepEqual(applied, []);
    assert.equal(tab.gap.cursor, null);
    tab.setCursor(501); // its first view's snapshot
    leader.postMessage({ kind: 'batch', after: 505, events: seqs(506, 506) });
    await settle();
    assert.deepEqual(applied, [502, 503, 504, 505, 506]);
    assert.deepEqual(served, [501, 503]);
  } finally {
    leader.close();
    tab.channel.channel.close();
  }
});
