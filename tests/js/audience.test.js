// The leader's tabs (page/audience.js): the stream open while a tab is visible.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Audience, TAB_STALE_MS } from '../../src/session_journal/web/page/audience.js';

test('open while a tab is visible; closed once every tab has been hidden for the delay', () => {
  const audience = new Audience(60_000, 'leader');
  assert.equal(audience.note('leader', true, 0), true);
  assert.equal(audience.note('other', false, 0), true);
  assert.equal(audience.decide(0), 'open');
  assert.equal(audience.note('leader', false, 1_000), false);
  assert.equal(audience.decide(1_000), 'wait');
  assert.equal(audience.decide(60_999), 'wait');
  assert.equal(audience.decide(61_000), 'close');
  audience.note('other', true, 62_000);
  assert.equal(audience.decide(62_000), 'open');
  audience.note('other', false, 63_000);
  assert.equal(audience.decide(63_000), 'wait'); // the delay starts again
});

test('a tab that closed, or has not been heard from, no longer keeps the stream open', () => {
  const audience = new Audience(0, 'leader');
  audience.note('leader', false, 0);
  audience.note('closed', true, 0);
  audience.note('crashed', true, 0);
  audience.forget('closed');
  assert.equal(audience.decide(TAB_STALE_MS), 'open');
  assert.equal(audience.decide(TAB_STALE_MS + 1), 'close');
  assert.deepEqual([...audience.tabs.keys()], ['leader']);
});

test("the leader's own tab is never stale", () => {
  const audience = new Audience(0, 'leader');
  audience.note('leader', true, 0);
  assert.equal(audience.decide(10 * TAB_STALE_MS), 'open');
});
