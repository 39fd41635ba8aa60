// The SSE parser (page/sse.js), fed as the network feeds it: chunks split anywhere.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SseParser } from '../../src/session_journal/web/page/sse.js';

const STREAM = 'retry: 2500\n\n'
  + 'id: 7\nevent: ready\ndata: {"cursor":6,"heartbeat_s":15}\n\n'
  + ': heartbeat\n\n'
  + 'id: 8\nevent: api_event\ndata: {"seq":8}\n\n'
  + 'data: first\ndata:second\n\n';

const EXPECTED = [
  { event: 'ready', data: '{"cursor":6,"heartbeat_s":15}', id: '7' },
  { event: 'api_event', data: '{"seq":8}', id: '8' },
  { event: 'message', data: 'first\nsecond', id: '8' },
];

test('a whole stream gives its events, in order, and the retry it asked for', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push(STREAM), EXPECTED);
  assert.equal(parser.retryMs, 2500);
  assert.equal(parser.lastEventId, '8');
});

test('every split of the stream into two chunks gives the same events', () => {
  for (let at = 0; at <= STREAM.length; at += 1) {
    const parser = new SseParser();
    const events = [...parser.push(STREAM.slice(0, at)), ...parser.push(STREAM.slice(at))];
    assert.deepEqual(events, EXPECTED, `split at ${at}`);
  }
});

test('one character at a time gives the same events', () => {
  const parser = new SseParser();
  const events = [...STREAM].flatMap((character) => parser.push(character));
  assert.deepEqual(events, EXPECTED);
});

test('CRLF, CR and LF all end lines, a CRLF split between chunks ends one', () => {
  for (const end of ['\r\n', '\r', '\n']) {
    const text = `event: ready${end}data: x${end}${end}data: y${end}${end}`;
    for (let at = 0; at <= text.length; at += 1) {
      const parser = new SseParser();
      const events = [...parser.push(text.slice(0, at)), ...parser.push(text.slice(at))];
      assert.deepEqual(events.map((event) => [event.event, event.data]),
        [['ready', 'x'], ['message', 'y']], `${JSON.stringify(end)} split at ${at}`);
    }
  }
});

test('an event with no data is not dispatched, and its type does not carry over', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push('event: rotate\n\ndata: z\n\n'), [{ event: 'message', data: 'z', id: '' }]);
});

test('an unfinished event waits for its blank line', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push('event: api_event\ndata: {"seq":1}\n'), []);
  assert.deepEqual(parser.push('\n'), [{ event: 'api_event', data: '{"seq":1}', id: '' }]);
});

test('only one space after the colon is dropped; a field with no colon is a name', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push('data:  two\ndata\n\n'), [{ event: 'message', data: ' two\n', id: '' }]);
});

test('a retry that is not digits, an id holding NUL and unknown fields are ignored', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push('retry: 1e3\nid: a\0b\nfoo: bar\ndata: d\n\n'), [{ event: 'message', data: 'd', id: '' }]);
  assert.equal(parser.retryMs, null);
});

test('non-ASCII text and escaped JSON pass through unchanged', () => {
  const parser = new SseParser();
  const [event] = parser.push('data: {"text":"caf\\u00e9 — ✓"}\n\n');
  assert.equal(JSON.parse(event.data).text, 'café — ✓');
});

test('an empty chunk between a CR and its LF changes nothing', () => {
  const parser = new SseParser();
  const events = [...parser.push('data: a\r'), ...parser.push(''), ...parser.push('\n\n')];
  assert.deepEqual(events, [{ event: 'message', data: 'a', id: '' }]);
});
