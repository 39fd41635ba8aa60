// The leader's connection (page/transport.js) against a fake server: batches, reconnects, halts.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { LogConnection } from '../../src/session_journal/web/page/transport.js';

const frame = (event, data, id) => `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
const apiEvent = (seq) => frame('api_event', { seq, session_id: 's', recorded_at_ms: seq, event: { type: 'turn_started', data: {} } }, seq);
const ready = (cursor) => `retry: 5\n\n${frame('ready', { cursor, heartbeat_s: 15 })}`;

/** A stream response sending `chunks`, then ending; with a `signal`, open until it aborts
 * (as a browser's fetch errors the body of an aborted request). */
function streamOf(chunks, signal = null) {
  const body = new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk));
      if (signal) signal.addEventListener('abort', () => controller.error(new Error('aborted')));
      else controller.close();
    },
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

const problem = (status, body) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/problem+json' } });

/** A connection to a server answering `responses` in turn; what it was asked and told. */
function connect(responses) {
  const asked = [];
  const told = [];
  const fetch = async (url, init) => {
    asked.push(url.searchParams.get('after_seq'));
    const next = responses.shift();
    if (!next) return new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(new Error('aborted'))));
    if (next instanceof Error) throw next;
    return typeof next === 'function' ? next(init.signal) : next;
  };
  const connection = new LogConnection({
    status: (state) => told.push(['status', state]),
    batch: (after, events) => told.push(['batch', after, events.map((event) => event.seq)]),
    expired: (body) => told.push(['expired', body.code]),
    unauthorized: () => told.push(['unauthorized']),
  }, { fetch, random: () => 0.5 });
  return { asked, told, connection };
}

test('a stream to its rotate, at once another from the last seq, then a 410 halts it', async () => {
  const { asked, told, connection } = connect([
    streamOf([ready(4), apiEvent(5) + apiEvent(6), apiEvent(7), frame('rotate', {})]),
    problem(410, { code: 'cursor_expired' }),
  ]);
  connection.seq = 4;
  connection.start();
  await connection.done;
  assert.deepEqual(asked, ['4', '7']);
  assert.deepEqual(told, [
    ['status', 'connecting'], ['status', 'live'], ['batch', 4, [5, 6]], ['batch', 6, [7]],
    ['status', 'reconnecting'], ['status', 'expired'], ['expired', 'cursor_expired'],
  ]);
  assert.equal(connection.halted, true);
  assert.equal(connection.retryMs, 5);
  assert.equal(connection.running, false);
});

test('from the frontier: the cursor is the one `ready` gives', async () => {
  const { asked, told, connection } = connect([streamOf([ready(41), apiEvent(42), frame('shutdown', {})]), problem(409, { code: 'cursor_ahead' })]);
  connection.start();
  await connection.done;
  assert.deepEqual(asked, [null, '42']);
  assert.deepEqual(told.filter(([kind]) => kind === 'batch'), [['batch', 41, [42]]]);
});

test('a dropped connection or a failed request reconnects from the last seq; seen seqs are skipped', async () => {
  const { asked, told, connection } = connect([
    streamOf([ready(1), apiEvent(2)]),
    new TypeError('network'),
    streamOf([ready(2), apiEvent(2) + apiEvent(3), frame('expired', { code: 'cursor_expired' })]),
  ]);
  connection.seq = 1;
  connection.start();
  await connection.done;
  assert.deepEqual(asked, ['1', '2', '2']);
  assert.deepEqual(told.filter(([kind]) => kind !== 'status'), [['batch', 1, [2]], ['batch', 2, [3]], ['expired', 'cursor_expired']]);
  assert.deepEqual(told.filter(([kind]) => kind === 'status').map(([, state]) => state),
    ['connecting', 'live', 'reconnecting', 'reconnecting', 'live', 'expired']);
});

test('a refused token halts it until resume; resumeFrom moves it', async () => {
  const { asked, told, connection } = connect([problem(401, { code: 'unauthorized' }), problem(410, { code: 'cursor_expired' })]);
  connection.seq = 3;
  connection.start();
  await connection.done;
  assert.deepEqual(told, [['status', 'connecting'], ['status', 'signed-out'], ['unauthorized']]);
  connection.start(); // halted: nothing
  assert.equal(connection.running, false);
  connection.resumeFrom(9);
  connection.start();
  await connection.done;
  assert.deepEqual(asked, ['3', '9']);
});

test('stop closes an open stream', async () => {
  const { told, connection } = connect([(signal) => streamOf([ready(0)], signal)]);
  connection.start();
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(connection.running, true);
  connection.stop();
  await connection.done;
  assert.equal(connection.running, false);
  assert.deepEqual(told, [['status', 'connecting'], ['status', 'live']]);
});
