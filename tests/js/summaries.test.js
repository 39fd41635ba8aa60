// One line per event (page/summaries.js): a summary written for each type.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { EventMemory, SUMMARIES, summarize } from '../../src/session_journal/web/page/summaries.js';

let seq = 0;
const served = (type, data, session = 's1', at = 1_000_000) => {
  seq += 1;
  return { seq, session_id: session, recorded_at_ms: at, event: { type, data } };
};

const activity = (kind, label, extra = {}) => ({
  state: 'running', details: { kind, label }, is_idle: kind === 'idle', waiting_for_input: false,
  capacity_retry: false, ...extra,
});

/** An example of every type and the summary it must read as (with no earlier events known). */
const EXAMPLES = {
  turn_started: [served('turn_started', { turn_id: 3, command_id: 'prompt-7', started_at_ms: null }),
    'turn 3 started · prompt-7', ''],
  turn_ended: [served('turn_ended', { turn: { command_id: 'prompt-7', accepted_ordinal: 3, outcome: { kind: 'completed', stop_reason: 'end_turn', reason: null, message: null } } }),
    'turn 3 ended · completed (end_turn)', ''],
  input_required: [served('input_required', { request: { id: 'q1', session_id: 's1', mode: 'form', message: 'Which directory?', requested_schema: {} }, turn_id: 3 }),
    'question · Which directory?', ''],
  input_resolved: [served('input_resolved', { elicitation_id: 'q1', action: 'accept', turn_id: 3 }),
    'answered · accept', ''],
  activity_changed: [served('activity_changed', { activity: activity('turn', 'fix the failing test') }),
    'activity · turn: fix the failing test', ''],
  session_fault: [served('session_fault', { reason: 'startup_failed', message: 'image pull failed: registry unreachable', command_id: null }),
    'fault · startup failed: image pull failed: registry unreachable', 'fault'],
  command_ended: [served('command_ended', { result: { owner: 'daemon', command_id: 'checkpoint-2', command_kind: 'checkpoint', outcome: 'rejected', reason: 'checkpoint_deferred', message: 'a turn is in progress', related_command_ids: [] } }),
    'checkpoint-2 rejected · checkpoint deferred: a turn is in progress', 'rejected'],
  legacy_notice: [served('legacy_notice', { original_type: 'session_restarted', command_id: null, message: 'no longer written' }),
    'legacy session_restarted · no longer written', ''],
};

test('every type the table knows has an example here', () => {
  assert.deepEqual(Object.keys(EXAMPLES).sort(), Object.keys(SUMMARIES).sort());
});

for (const [type, [event, text, alert]] of Object.entries(EXAMPLES)) {
  test(`${type} reads as "${text}"`, () => {
    assert.deepEqual(summarize(event), { text, alert });
  });
}

test("a turn's duration comes from its turn_started when the page has it", () => {
  const memory = new EventMemory();
  const started = served('turn_started', { turn_id: 4, command_id: 'p', started_at_ms: null }, 's2', 10_000);
  const ended = served('turn_ended', { turn: { command_id: 'p', accepted_ordinal: 4, outcome: { kind: 'failed', stop_reason: null, reason: 'runtime_stopped', message: 'the container exited' } } }, 's2', 51_000);
  assert.equal(summarize(ended, memory).text, 'turn 4 ended · failed · runtime stopped: the container exited');
  memory.remember([ended, started]);
  assert.deepEqual(summarize(ended, memory), {
    text: 'turn 4 ended · failed · after 41 s · runtime stopped: the container exited', alert: 'failed',
  });
  const other = { ...ended, session_id: 's3' }; // another session's turn 4
  assert.equal(summarize(other, memory).text, 'turn 4 ended · failed · runtime stopped: the container exited');
});

test('an activity change names the activity before it when the page has it', () => {
  const memory = new EventMemory();
  const idle = served('activity_changed', { activity: activity('idle', null) }, 's4');
  const turn = served('activity_changed', { activity: activity('turn', 'fix it', { waiting_for_input: true }) }, 's4');
  const same = served('activity_changed', { activity: activity('turn', 'fix it', { waiting_for_input: true }) }, 's4');
  memory.remember([same, turn, idle]); // newest first, as the feed reads them
  assert.equal(summarize(idle, memory).text, 'activity · idle');
  assert.equal(summarize(turn, memory).text, 'activity · turn: fix it · waiting for input · was idle');
  assert.equal(summarize(same, memory).text, 'activity · turn: fix it · waiting for input');
});

test('failed and rejected commands and failed turns are marked; others are not', () => {
  const command = (outcome) => served('command_ended', { result: { owner: 'relay', command_id: 'c', command_kind: 'prompt', outcome, reason: null, message: null, related_command_ids: ['d', 'e'] } });
  assert.deepEqual(['succeeded', 'failed', 'rejected', 'cancelled'].map((outcome) => summarize(command(outcome))),
    [{ text: 'c (+2) succeeded', alert: '' }, { text: 'c (+2) failed', alert: 'failed' },
      { text: 'c (+2) rejected', alert: 'rejected' }, { text: 'c (+2) cancelled', alert: '' }]);
});

test("a question of older code (no request), a command ending with a message and no reason", () => {
  assert.equal(summarize(served('input_required', { request: null, turn_id: null })).text, 'question');
  const ended = served('command_ended', { result: { owner: 'relay', command_id: 'c', command_kind: 'k', outcome: 'failed', reason: null, message: 'boom', related_command_ids: [] } });
  assert.equal(summarize(ended).text, 'c failed · boom');
});

test("a type this page does not know, and a body of a shape it does not know, are named", () => {
  assert.deepEqual(summarize(served('turn_paused', {})), { text: 'turn paused', alert: '' });
  assert.deepEqual(summarize(served('turn_ended', { turn: null })), { text: 'turn ended', alert: '' });
  assert.deepEqual(summarize(served('toString', {})), { text: 'toString', alert: '' });
});

test('text is kept as text: markup in agent text is not interpreted here', () => {
  const event = served('input_required', { request: { id: 'q', session_id: 's', mode: 'form', message: '<img src=x onerror=alert(1)>', requested_schema: {} }, turn_id: null });
  assert.equal(summarize(event).text, 'question · <img src=x onerror=alert(1)>');
});

test('the memory is bounded: the least recently told session is forgotten first', () => {
  const memory = new EventMemory(2, 2);
  for (const session of ['a', 'b', 'a', 'c']) {
    memory.remember([served('turn_started', { turn_id: 1, command_id: 'p', started_at_ms: 5 }, session)]);
  }
  assert.deepEqual([...memory.sessions.keys()], ['a', 'c']);
  for (const turn of [1, 2, 3]) {
    memory.remember([served('turn_started', { turn_id: turn, command_id: 'p', started_at_ms: turn }, 'a')]);
  }
  assert.equal(memory.turnStart('a', 1), null);
  assert.equal(memory.turnStart('a', 3), 3);
});

test("a turn that ended before it started (two clocks) leaves its duration out", () => {
  const memory = new EventMemory();
  const started = served('turn_started', { turn_id: 5, command_id: 'p', started_at_ms: 20_000 }, 's5', 20_000);
  const ended = served('turn_ended', { turn: { command_id: 'p', accepted_ordinal: 5, outcome: { kind: 'completed', stop_reason: null, reason: null, message: null } } }, 's5', 19_000);
  memory.remember([started, ended]);
  assert.equal(summarize(ended, memory).text, 'turn 5 ended · completed');
});

test('an event of a shape the page does not know is not remembered, and nothing throws', () => {
  const memory = new EventMemory();
  memory.remember([{ seq: 1, session_id: 's', event: { type: 'turn_started' } }, { seq: 2, session_id: 's', event: { type: 'activity_changed', data: null } }]);
  assert.equal(memory.turnStart('s', undefined), null);
});
