// The consumers view's pure parts (page/lag.js): lag over the polls, its sparkline, the state in
// words.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { consumerState, LagHistory, sparkline } from '../../src/session_journal/web/page/lag.js';

const status = (name, lag, more = {}) => ({ name, lag, lag_seconds: 0, stuck: false, stuck_after_s: 300, ...more });

test('each poll adds a lag to each consumer listed; the oldest polls and unlisted consumers go', () => {
  const history = new LagHistory(3);
  history.add([status('a', 5), status('b', 0)]);
  history.add([status('a', 7), status('b', 1)]);
  history.add([status('a', 2)]); // b removed meanwhile
  history.add([status('a', 9)]);
  assert.deepEqual(history.of('a'), [7, 2, 9]);
  assert.deepEqual(history.of('b'), []);
});

test('the sparkline puts the highest lag at the top and 0 at the bottom', () => {
  assert.equal(sparkline([], 100, 20), '');
  assert.equal(sparkline([0, 5, 10], 100, 20), '0.0,20.0 50.0,10.0 100.0,0.0');
  assert.equal(sparkline([0, 0], 100, 20), '0.0,20.0 100.0,20.0'); // nothing behind: flat
  assert.equal(sparkline([3], 100, 20), '100.0,0.0');
});

test('a consumer is said stuck, behind or caught up, in words', () => {
  assert.deepEqual(consumerState(status('a', 1234, { stuck: true, stuck_after_s: 300 })), {
    kind: 'stuck', text: 'no ack for over 5 min while 1,234 events wait',
  });
  assert.deepEqual(consumerState(status('a', 1, { lag_seconds: 41.2 })), {
    kind: 'behind', text: 'behind by 1 event (41 s)',
  });
  assert.deepEqual(consumerState(status('a', 0)), { kind: 'caught-up', text: 'caught up' });
});
