// The sessions list, one session, and search.

import { ApiError, getJSON } from './api.js';
import { cut, el, linkButton, svg, timeNode } from './dom.js';
import { FeedView, REFRESH_MS } from './feed.js';
import { consumerState, LagHistory, sparkline } from './lag.js';
import { duration } from './time.js';
import { TimelineChart } from './timelinechart.js';

export const STATES = ['provisioning', 'running', 'checkpointing', 'closing', 'closed',
  'destroying', 'error', 'startup-cleanup'];
const LIVE_DELAY_MS = 250; // events close together cause one refresh
const LIVE_EVERY_MS = 1000; // and refreshes caused by events come at most this often
const MAX_ITEMS = 1000; // transcript items kept as new ones arrive
const COUNTS_MS = 5_000; // the sessions' counts by state are read again at most this often

/** Calls `action` `LIVE_DELAY_MS` after `poke` (events close together: once), at most once per
 * `LIVE_EVERY_MS` (a busy session: once a second), and every `REFRESH_MS`. */
class Refresher {
  constructor(action) {
    this.action = action;
    this.timer = null;
    this.ranAt = -Infinity; // `performance.now()` when `action` last ran from a poke
    this.interval = setInterval(() => {
      if (document.visibilityState === 'visible') this.poke();
    }, REFRESH_MS);
  }

  poke() {
    if (this.timer === null) {
      const wait = Math.max(LIVE_DELAY_MS, this.ranAt + LIVE_EVERY_MS - performance.now());
      this.timer = setTimeout(() => {
        this.timer = null;
        this.ranAt = performance.now();
        this.action();
      }, wait);
    }
  }

  stop() {
    clearInterval(this.interval);
    clearTimeout(this.timer);
  }
}

function activityText(activity) {
  if (!activity) return '—';
  const parts = [activity.state];
  if (activity.waiting_for_input) parts.push('waiting for input');
  else if (activity.is_idle) parts.push('idle');
  if (activity.capacity_retry) parts.push('retrying for capacity');
  if (activity.details && activity.details.label) parts.push(activity.details.label);
  return parts.join(' · ');
}

function operationText(operation) {
  if (!operation) return '—';
  const related = operation.related_command_ids.length ? ` (+${operation.related_command_ids.length})` : '';
  return `${operation.command_id}${related}`;
}

export class SessionsView {
  constructor(app, params) {
    this.app = app;
    this.state = params.get('state') || '';
    this.workspace = params.get('workspace') || '';
    this.pages = [null]; // the `before` cursor of each page shown so far (null: the newest)
    this.listed = new Set();
    this.drawn = false;
    this.rows = el('tbody');
    this.counts = el('p', { class: 'counts', 'aria-label': 'Sessions by state' });
    this.more = el('button', { type: 'button', onclick: () => this.turn(1) }, 'Older sessions');
    this.back = el('button', { type: 'button', onclick: () => this.turn(-1) }, 'Newer sessions');
    const state = el('select', { 'aria-label': 'State' },
      el('option', { value: '' }, 'any state'),
      STATES.map((name) => el('option', { value: name, selected: name === this.state }, name)));
    const workspace = el('input', { type: 'text', value: this.workspace, placeholder: 'workspace id', 'aria-label': 'Workspace', maxlength: 200 });
    const apply = () => this.app.navigate({ view: 'sessions', state: state.value, workspace: workspace.value.trim() });
    state.addEventListener('change', apply);
    workspace.addEventListener('keydown', (event) => { if (event.key === 'Enter') apply(); });
    this.node = el('section', { id: 'sessions' },
      el('h2', {}, 'Sessions'),
      el('div', { class: 'filters' },
        el('label', {}, 'State ', state), el('label', {}, 'Workspace ', workspace),
        el('button', { type: 'button', onclick: apply }, 'Apply')),
      this.counts,
      el('table', {},
        el('thead', {}, el('tr', {}, ['Session', 'Workspace', 'State', 'Activity', 'Checkpoint operation', 'Created'].map((h) => el('th', {}, h)))),
        this.rows),
      el('div', { class: 'pager' }, this.back, this.more));
    this.refresher = new Refresher(() => this.app.run(this.load()));
  }

  /** The page shown (refreshed in place), then the counts by state; the lower `as_of_seq`. */
  async load() {
    const before = this.pages.at(-1);
    // The counts (a GROUP BY over every session) at most every COUNTS_MS, however often the
    // list is read again.
    const fresh = this.countedAt === undefined || Date.now() - this.countedAt >= COUNTS_MS;
    const counting = fresh ? getJSON('api/session-counts', { workspace_id: this.workspace }) : null;
    if (counting) counting.catch(() => {}); // awaited below, after the rows are drawn
    const page = await getJSON('api/sessions', {
      state: this.state, workspace_id: this.workspace, before, limit: 50,
    });
    this.listed = new Set(page.sessions.map((summary) => summary.session.id));
    this.rows.replaceChildren(...page.sessions.map((summary) => this.row(summary)));
    if (!page.sessions.length) {
      this.rows.append(el('tr', {}, el('td', { colspan: 6, class: 'muted' }, 'No sessions match.')));
    }
    this.nextBefore = page.next_before;
    this.more.disabled = !page.next_before;
    this.back.disabled = this.pages.length === 1;
    if (!this.drawn && page.sessions.length) {
      this.drawn = true;
      performance.mark('sessions-drawn');
    }
    if (!counting) return page.as_of_seq;
    const counts = await counting;
    this.countedAt = Date.now();
    this.showCounts(counts);
    return Math.min(page.as_of_seq, counts.as_of_seq);
  }

  /** "4 sessions: 2 provisioning · 1 running · 1 error", each state a filter (the states with
   * none left out). */
  showCounts(counts) {
    const parts = [];
    for (const name of STATES) {
      const count = counts.counts[name] || 0;
      if (!count) continue;
      if (parts.length) parts.push(' · ');
      const chosen = name === this.state;
      parts.push(el('button', {
        type: 'button',
        class: `link state state-${name}`,
        'aria-pressed': chosen ? 'true' : 'false',
        onclick: () => this.app.navigate({ view: 'sessions', state: chosen ? '' : name, workspace: this.workspace }),
      }, `${count.toLocaleString('en')} ${name}`));
    }
    const total = `${counts.total.toLocaleString('en')} session${counts.total === 1 ? '' : 's'}`;
    this.counts.replaceChildren(parts.length ? `${total}: ` : `${total}.`, ...parts);
  }

  row(summary) {
    const { session } = summary;
    return el('tr', {},
      el('td', {}, linkButton(session.id, () => this.app.navigate({ view: 'session', id: session.id }))),
      el('td', {}, session.workspace_id),
      el('td', {}, el('span', { class: `state state-${STATES.includes(session.state) ? session.state : 'other'}` }, session.state)),
      el('td', {}, activityText(summary.activity)),
      el('td', {}, operationText(summary.checkpoint_operation)),
      el('td', {}, timeNode(summary.created_at, true)));
  }

  turn(direction) {
    if (direction > 0 && this.nextBefore) this.pages.push(this.nextBefore);
    if (direction < 0 && this.pages.length > 1) this.pages.pop();
    this.app.run(this.load());
  }

  onEvents(events) {
    const firstPage = this.pages.length === 1;
    if (events.some((event) => this.listed.has(event.session_id) || firstPage)) this.refresher.poke();
  }

  stop() {
    this.refresher.stop();
  }
}

function transcriptText(body) {
  if (body.type === 'user_prompt') {
    return body.content.map((block) => (typeof block.text === 'string' ? block.text : JSON.stringify(block))).join('\n');
  }
  return typeof body.text === 'string' ? body.text : JSON.stringify(body);
}

export class SessionView {
  constructor(app, params) {
    this.app = app;
    this.id = params.get('id') || '';
    this.newestPosition = -1;
    this.oldestPosition = null;
    this.summary = el('dl', { class: 'summary' });
    this.questions = el('ul', { class: 'questions' });
    this.items = el('ol', { class: 'transcript', reversed: true });
    this.noItems = el('p', { class: 'muted empty', hidden: true }, 'No transcript items yet.');
    this.state = el('pre', { class: 'state' });
    this.older = el('button', { type: 'button', disabled: true, onclick: () => this.loadOlder() }, 'Load older');
    this.generation = 0; // counts rebuilds of the transcript: an older page read before one is dropped
    this.events = new FeedView(app, new URLSearchParams({ session: this.id }), true);
    this.timeline = new TimelineChart(this.id);
    this.node = el('section', { id: 'session' },
      el('h2', {}, 'Session ', el('code', {}, this.id)),
      this.summary,
      this.timeline.node,
      el('h3', {}, 'Pending questions'), this.questions,
      this.events.node,
      el('h3', {}, 'Transcript (newest first)'), this.items, this.noItems, this.older,
      el('details', {}, el('summary', {}, 'Materialized state'), this.state));
    this.refresher = new Refresher(() => this.app.run(this.load()));
  }

  path(suffix = '') {
    return `api/sessions/${encodeURIComponent(this.id)}${suffix}`;
  }

  /** The session, its state, questions and newest transcript items; the lowest `as_of_seq`. */
  async load() {
    let read;
    try {
      read = await Promise.all([
        getJSON(this.path()), getJSON(this.path('/state')), getJSON(this.path('/questions')),
        getJSON(this.path('/transcript'), { limit: 50 }),
        this.eventsLoaded ? null : this.events.load(),
        this.eventsLoaded ? null : this.timeline.load(),
      ]);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error;
      this.notFound();
      return null;
    }
    const [session, state, questions, transcript, eventsAsOf, timelineAsOf] = read;
    this.eventsLoaded = true;
    const record = session.session;
    const entries = [
      ['State', record.state], ['Workspace', record.workspace_id], ['Project', record.project_id],
      ['Activity', activityText(session.activity)],
      ['Checkpoint operation', operationText(session.checkpoint_operation)],
      ['Last error', record.last_error || '—'],
    ];
    this.summary.replaceChildren(...entries.flatMap(([name, value]) => [el('dt', {}, name), el('dd', {}, value)]));
    this.questions.replaceChildren(...questions.questions.map((question) => el('li', {},
      el('p', {}, question.message),
      el('details', {}, el('summary', {}, 'Requested schema'),
        el('pre', {}, JSON.stringify(question.requested_schema, null, 2))))));
    if (!questions.questions.length) this.questions.append(el('li', { class: 'muted' }, 'None.'));
    this.state.textContent = JSON.stringify(state.state, null, 2);
    const { items } = transcript; // newest first; positions have no holes
    const behind = this.newestPosition >= 0 && items.length
      && items.at(-1).position > this.newestPosition + 1;
    if (this.oldestPosition === null || behind) {
      // The first load, or more items came than a page holds: start again from the newest page
      // ("Load older" reaches the rest) rather than leave a hole.
      this.generation += 1;
      this.items.replaceChildren(...items.map((item) => this.item(item)));
      this.newestPosition = items.length ? items[0].position : -1;
      this.oldestPosition = transcript.next_before_position;
      this.older.disabled = items.length === 0 || transcript.next_before_position === 0;
    } else {
      const fresh = items.filter((item) => item.position > this.newestPosition).reverse();
      for (const item of fresh) this.items.prepend(this.item(item)); // the newest ends on top
      if (fresh.length) this.newestPosition = fresh.at(-1).position;
      if (this.items.childElementCount > MAX_ITEMS) { // the oldest drop off; "Load older" again
        while (this.items.childElementCount > MAX_ITEMS) this.items.lastChild.remove();
        this.oldestPosition = Number(this.items.lastChild.dataset.position);
        this.older.disabled = false;
      }
    }
    this.noItems.hidden = this.items.childElementCount > 0;
    const seqs = [session.as_of_seq, state.as_of_seq, questions.as_of_seq, transcript.as_of_seq];
    const followed = [eventsAsOf, timelineAsOf].filter((seq) => seq !== null);
    return Math.min(...seqs, ...followed);
  }

  /** No such session (never created, deleted, or another workspace's): said in words. */
  notFound() {
    this.missing = true;
    this.refresher.stop();
    this.events.stop();
    this.timeline.stop();
    this.node.replaceChildren(
      el('h2', {}, 'Session ', el('code', {}, this.id)),
      el('p', { class: 'not-found' }, 'Not found: no session has this id (it was never created, was deleted, or belongs to a workspace this token does not see).'));
    if (this.app.view === this) document.title = 'not found · session-journal';
  }

  item(item) {
    const node = el('li', { class: `item ${item.body.type}` },
      el('span', { class: 'kind' }, `${item.position} · ${item.body.type.replace('_', ' ')}`),
      el('p', { class: 'text' }, cut(transcriptText(item.body), 20_000)));
    node.dataset.position = String(item.position);
    return node;
  }

  async loadOlder() {
    if (this.oldestPosition === null) return; // not loaded yet
    this.older.disabled = true; // one page at a time: a second click would read the same one
    const { generation } = this;
    const page = await this.app.run(getJSON(this.path('/transcript'), { before_position: this.oldestPosition, limit: 50 }));
    if (generation !== this.generation) return; // rebuilt meanwhile: this page may not fit
    this.older.disabled = false;
    if (!page) return;
    for (const item of page.items) this.items.append(this.item(item));
    this.oldestPosition = page.next_before_position;
    this.older.disabled = page.items.length === 0 || page.next_before_position === 0;
  }

  onEvents(events) {
    if (this.missing) return;
    this.events.onEvents(events);
    this.timeline.add(events);
    if (events.some((event) => event.session_id === this.id)) this.refresher.poke();
  }

  stop() {
    this.refresher.stop();
    this.events.stop();
    this.timeline.stop();
  }
}

const LAGS = new LagHistory(); // each consumer's lag at each poll since the page opened
const SPARK = { width: 120, height: 24 };

/** Every durable consumer (`GET api/consumers`, read every `REFRESH_MS`): where it is, how far
 * behind, who holds it, whether it is stuck (in words and colour), and its lag over the polls
 * since the page opened. */
export class ConsumersView {
  constructor(app) {
    this.app = app;
    this.rows = el('tbody');
    this.note = el('p', { class: 'muted empty', hidden: true }, 'No durable consumers are registered.');
    this.asOf = el('span', { class: 'muted' });
    this.node = el('section', { id: 'consumers' },
      el('h2', {}, 'Consumers ', this.asOf),
      el('table', {}, el('thead', {}, el('tr', {},
        ...['Consumer', 'State', 'Position', 'Behind', 'Holder', 'Last ack', 'Lag since this page opened']
          .map((name) => el('th', {}, name)))), this.rows),
      this.note);
    this.refresher = new Refresher(() => this.app.run(this.load()));
  }

  /** One poll; its `as_of_seq`. */
  async load() {
    const read = await getJSON('api/consumers');
    LAGS.add(read.consumers);
    this.asOf.textContent = `· as of seq ${read.as_of_seq.toLocaleString('en')}`;
    this.rows.replaceChildren(...read.consumers.map((status) => this.row(status)));
    this.note.hidden = read.consumers.length > 0;
    return read.as_of_seq;
  }

  row(status) {
    const state = consumerState(status);
    const lags = LAGS.of(status.name);
    const top = Math.max(0, ...lags);
    const holder = status.holder === null ? '—' : `${status.holder} · generation ${status.generation}`;
    const row = el('tr', { class: `consumer ${state.kind}` },
      el('td', {}, el('code', {}, status.name)),
      el('td', { class: 'consumer-state' }, state.kind === 'stuck' ? el('span', { class: 'badge' }, '⚠ stuck') : null, state.text),
      el('td', { class: 'seq' }, status.position.toLocaleString('en')),
      el('td', {}, `${status.lag.toLocaleString('en')} event${status.lag === 1 ? '' : 's'}`,
        status.lag ? ` · the oldest ${duration(Math.round(status.lag_seconds * 1000)) || '0 ms'} old` : ''),
      el('td', {}, holder),
      el('td', { class: 'when' }, status.last_ack_at_ms === null ? 'never' : timeNode(status.last_ack_at_ms, true)),
      el('td', {}, svg('svg', {
        class: 'spark', viewBox: `0 0 ${SPARK.width} ${SPARK.height}`, role: 'img',
        'aria-label': `lag at each of ${lags.length} polls, highest ${top.toLocaleString('en')} events`,
      }, svg('title', {}, `lag at each of ${lags.length} polls since this page opened; highest ${top.toLocaleString('en')} events`),
      svg('polyline', { points: sparkline(lags, SPARK.width, SPARK.height - 2) }))));
    row.dataset.name = status.name;
    return row;
  }

  onEvents() {} // read on its own clock

  stop() {
    this.refresher.stop();
  }
}

export class SearchView {
  constructor(app, params) {
    this.app = app;
    this.q = params.get('q') || '';
    this.results = el('ol', { class: 'hits' });
    this.node = el('section', { id: 'search' }, el('h2', {}, 'Search'), this.results);
  }

  async load() {
    if (!this.q) {
      this.results.replaceChildren(el('li', { class: 'muted' }, 'Type words in the search box and press Enter.'));
      return null;
    }
    const found = await getJSON('api/search', { q: this.q, limit: 50 });
    this.results.replaceChildren(...found.hits.map((hit) => el('li', {},
      el('div', { class: 'hit' },
        linkButton(hit.session_id, () => this.app.navigate({ view: 'session', id: hit.session_id })),
        el('span', { class: 'muted' }, ` #${hit.seq} · ${hit.kind} · `, timeNode(hit.ts))),
      el('p', { class: 'snippet' }, hit.snippet))));
    if (!found.hits.length) this.results.append(el('li', { class: 'muted' }, `No results for “${cut(this.q, 100)}”.`));
    return null;
  }

  onEvents() {}

  stop() {}
}
