// One line per event that says what happened, written for its type: `SUMMARIES` holds one
// function per API event type (a test holds its keys to the server's `EVENT_TYPES`). A summary
// is text, never HTML; the views put it in the document with `textContent`. Pure.

import { duration } from './time.js';

const words = (tag) => (typeof tag === 'string' ? tag.replaceAll('_', ' ') : '');
const joined = (...parts) => parts.filter(Boolean).join(' · ');
const colon = (head, text) => (text ? `${head}: ${text}` : head);

/** A reason and a message: `checkpoint deferred: a turn is in progress`. */
function why(reason, message) {
  const head = words(reason);
  return head && message ? `${head}: ${message}` : head || message || '';
}

function activityWords(activity) {
  if (!activity) return '';
  const details = activity.details || null;
  const label = details && details.label ? details.label : '';
  const head = colon(details ? details.kind : activity.state, label);
  const flags = [];
  if (activity.waiting_for_input) flags.push('waiting for input');
  if (activity.capacity_retry) flags.push('retrying for capacity');
  return joined(head, ...flags);
}

/** The summary of each event type: `(data, event, memory) -> {text, alert}`; `alert` is the
 * word that marks an event to look at (`fault`, `failed`, `rejected`; '' for none). */
export const SUMMARIES = {
  turn_started: (data) => ({
    text: joined(`turn ${data.turn_id} started`, data.command_id),
    alert: '',
  }),
  turn_ended: (data, event, memory) => {
    const { turn } = data;
    const outcome = turn.outcome || {};
    const number = turn.accepted_ordinal === null || turn.accepted_ordinal === undefined
      ? `turn of ${turn.command_id}` : `turn ${turn.accepted_ordinal}`;
    const started = turn.accepted_ordinal === null || turn.accepted_ordinal === undefined
      ? null : memory.turnStart(event.session_id, turn.accepted_ordinal);
    const kind = outcome.stop_reason ? `${outcome.kind} (${outcome.stop_reason})` : outcome.kind;
    const lasted = started === null ? '' : duration(event.recorded_at_ms - started);
    const took = lasted ? `after ${lasted}` : ''; // none when the clocks disagree (negative)
    return {
      text: joined(`${number} ended`, kind, took, why(outcome.reason, outcome.message)),
      alert: outcome.kind === 'failed' ? 'failed' : '',
    };
  },
  input_required: (data) => ({
    text: data.request ? `question · ${data.request.message}` : 'question',
    alert: '',
  }),
  input_resolved: (data) => ({ text: `answered · ${data.action}`, alert: '' }),
  activity_changed: (data, event, memory) => {
    const now = activityWords(data.activity);
    const before = memory.activityBefore(event.session_id, event.seq) || '';
    return {
      text: joined(`activity · ${now}`, before && before !== now ? `was ${before}` : ''),
      alert: '',
    };
  },
  session_fault: (data) => ({
    text: `fault · ${why(data.reason, data.message)}`,
    alert: 'fault',
  }),
  command_ended: (data) => {
    const { result } = data;
    const related = result.related_command_ids && result.related_command_ids.length
      ? `(+${result.related_command_ids.length})` : '';
    const head = [result.command_id, related, result.outcome].filter(Boolean).join(' ');
    return {
      text: joined(head, why(result.reason, result.message)),
      alert: ['failed', 'rejected'].includes(result.outcome) ? result.outcome : '',
    };
  },
  legacy_notice: (data) => ({
    text: joined(`legacy ${data.original_type}`, data.message),
    alert: '',
  }),
};

/** What the page remembers of each session's earlier events for the summaries of later ones:
 * when each turn started, and the words of the activity before a seq. Bounded: `sessions`
 * sessions (the least recently told forgotten first), `perSession` entries of each kind; a
 * few numbers and short strings each. */
export class EventMemory {
  constructor(sessions = 200, perSession = 50) {
    this.limit = sessions;
    this.perSession = perSession;
    this.sessions = new Map(); // session id -> {turns: Map(turn id -> ms), activities: [[seq, activity]] by seq}
  }

  /** Remember `events` (any order; a body of a shape this page does not know is passed
   * over). */
  remember(events) {
    for (const event of events) {
      try {
        this.rememberOne(event);
      } catch {
        // not remembered: its later events' summaries leave that part out
      }
    }
  }

  rememberOne(event) {
    const body = event.event;
    if (body.type !== 'turn_started' && body.type !== 'activity_changed') return;
    const data = body.data;
    if (body.type === 'turn_started') {
      const at = data.started_at_ms ?? event.recorded_at_ms;
      if (!Number.isFinite(at)) return;
      const memory = this.session(event.session_id);
      memory.turns.set(data.turn_id, at);
      if (memory.turns.size > this.perSession) memory.turns.delete(memory.turns.keys().next().value);
      return;
    }
    const words = activityWords(data.activity);
    const memory = this.session(event.session_id);
    const list = memory.activities;
    let index = list.length;
    while (index > 0 && list[index - 1][0] > event.seq) index -= 1;
    if (index > 0 && list[index - 1][0] === event.seq) return;
    list.splice(index, 0, [event.seq, words]);
    if (list.length > this.perSession) list.shift();
  }

  session(id) {
    let memory = this.sessions.get(id);
    if (memory) {
      this.sessions.delete(id); // most recently told last
    } else {
      memory = { turns: new Map(), activities: [] };
      if (this.sessions.size >= this.limit) this.sessions.delete(this.sessions.keys().next().value);
    }
    this.sessions.set(id, memory);
    return memory;
  }

  /** When turn `turnId` of `sessionId` started (ms), null when not remembered. */
  turnStart(sessionId, turnId) {
    const memory = this.sessions.get(sessionId);
    const at = memory ? memory.turns.get(turnId) : undefined;
    return at === undefined ? null : at;
  }

  /** The words of the activity of `sessionId` before seq `seq`, null when not remembered. */
  activityBefore(sessionId, seq) {
    const memory = this.sessions.get(sessionId);
    if (!memory) return null;
    let found = null;
    for (const [at, activity] of memory.activities) {
      if (at >= seq) break;
      found = activity;
    }
    return found;
  }
}

/** The summary of `event` (an API event as served): `{text, alert}`; `memory` (an
 * `EventMemory`) holds the earlier events the page has. A type this page does not know (a
 * newer server's) is named as it is. */
export function summarize(event, memory = new EventMemory()) {
  const body = event.event || {};
  const write = Object.hasOwn(SUMMARIES, body.type) ? SUMMARIES[body.type] : null;
  if (!write) return { text: words(body.type) || 'event', alert: '' };
  try {
    return write(body.data || {}, event, memory);
  } catch {
    return { text: words(body.type), alert: '' }; // a body of a shape this page does not know
  }
}
