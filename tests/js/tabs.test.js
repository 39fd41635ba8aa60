// The tab protocol (page/tabs.js): named messages, handed to the handler of their kind.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { channelName, messages, PROTOCOL, TabChannel } from '../../src/session_journal/web/page/tabs.js';

class FakeChannel {
  constructor() { this.sent = []; this.onmessage = null; }
  postMessage(message) { this.sent.push(structuredClone(message)); }
}

test('each message names its kind and its fields', () => {
  assert.deepEqual(messages.batch(4, [{ seq: 5 }]), { kind: 'batch', after: 4, events: [{ seq: 5 }] });
  assert.deepEqual(messages.status('live'), { kind: 'status', state: 'live', detail: '' });
  assert.deepEqual(messages.expired({ code: 'cursor_expired' }), { kind: 'expired', problem: { code: 'cursor_expired' } });
  assert.deepEqual(messages.tab('t1', true), { kind: 'tab', tab: 't1', visible: true });
  assert.deepEqual(messages.bye('t1'), { kind: 'bye', tab: 't1' });
  for (const kind of ['unauthorized', 'hello', 'resume']) assert.deepEqual(messages[kind](), { kind });
});

test('post reaches the other tabs, broadcast this one too', () => {
  const channel = new FakeChannel();
  const heard = [];
  const tabs = new TabChannel(channel, { hello: (message) => heard.push(message) });
  tabs.post(messages.hello());
  assert.deepEqual(heard, []);
  tabs.broadcast(messages.hello());
  assert.deepEqual(heard, [{ kind: 'hello' }]);
  assert.deepEqual(channel.sent, [{ kind: 'hello' }, { kind: 'hello' }]);
  channel.onmessage({ data: messages.hello() }); // from another tab
  assert.equal(heard.length, 2);
});

test("messages of no known kind (an older page's, a later one's) are ignored", () => {
  const heard = [];
  const tabs = new TabChannel(new FakeChannel(), { batch: (message) => heard.push(message) });
  for (const message of [{ t: 'batch', after: 1, events: [] }, { kind: 'toString' }, { kind: 'later' }, null, 'batch']) {
    tabs.receive(message);
  }
  assert.deepEqual(heard, []);
});

test('a tab with no BroadcastChannel is alone: broadcast reaches itself', () => {
  const heard = [];
  const tabs = new TabChannel(null, { resume: (message) => heard.push(message) });
  tabs.post(messages.resume());
  tabs.broadcast(messages.resume());
  assert.deepEqual(heard, [{ kind: 'resume' }]);
});

test("the channel's name carries the protocol's version and the page's mount", () => {
  assert.equal(channelName('/journal/'), `${PROTOCOL} /journal/`);
  assert.match(PROTOCOL, /\/2$/);
});
