// The operator page: a view chosen by the URL's query (`?view=sessions&state=&workspace=`,
// `?view=feed&session=&type=`, `?view=session&id=`, `?view=search&q=`), kept live by the
// browser's one shared stream (stream.js, imported once the first view is drawn: its modules
// are not on the way to the first row).

import { ApiError, getJSON, signIn } from './api.js';
import { redrawTimes, say, setTimeZone, timeZone } from './dom.js';
import { FeedView } from './feed.js';
import { zoneName } from './time.js';
import { ConsumersView, SearchView, SessionView, SessionsView } from './views.js';

const VIEWS = {
  sessions: SessionsView, feed: FeedView, session: SessionView, search: SearchView, consumers: ConsumersView,
};
const STATUS_TEXT = {
  connecting: 'connecting', live: 'live', reconnecting: 'reconnecting', expired: 'expired',
  paused: 'paused', 'signed-out': 'signed out',
};

const $ = (id) => document.getElementById(id);
const RELATIVE_MS = 5_000; // relative times ("41 s ago") are drawn again this often
const KEYS = { s: 'sessions', f: 'feed', c: 'consumers' }; // keys that open a view (not while typing)
const TYPING_MS = 1_000;

/** The `token=` of a fragment, percent-decoded (a `+` stays a `+`: tokens may hold one). */
function fragmentToken(hash) {
  for (const part of hash.replace(/^#/, '').split('&')) {
    if (part.startsWith('token=')) {
      try {
        return decodeURIComponent(part.slice(6));
      } catch {
        return part.slice(6);
      }
    }
  }
  return '';
}

class App {
  constructor() {
    const meta = document.querySelector('meta[name="session-journal-page-hidden-close-s"]');
    const hiddenCloseS = Number(meta && meta.content) || 60;
    this.view = null;
    this.hiddenCloseMs = hiddenCloseS * 1000;
    this.stream = null; // the SharedStream, once stream.js is loaded (`follow`)
    this.streamLoading = null;
    $('nav-sessions').addEventListener('click', () => this.navigate({ view: 'sessions' }));
    $('nav-feed').addEventListener('click', () => this.navigate({ view: 'feed' }));
    $('nav-consumers').addEventListener('click', () => this.navigate({ view: 'consumers' }));
    const box = $('search-box');
    box.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && box.value.trim()) this.navigate({ view: 'search', q: box.value.trim() });
    });
    $('login-button').addEventListener('click', () => this.signIn($('login-token').value.trim()));
    $('login-token').addEventListener('keydown', (event) => {
      if (event.key === 'Enter') this.signIn($('login-token').value.trim());
    });
    const zone = $('time-zone');
    zone.value = timeZone();
    zone.options[1].textContent = `this browser's (${zoneName(-new Date().getTimezoneOffset())})`;
    zone.addEventListener('change', () => setTimeZone(zone.value));
    addEventListener('storage', () => { // another tab chose another zone
      zone.value = timeZone();
      redrawTimes();
    });
    setInterval(() => {
      if (document.visibilityState === 'visible') redrawTimes(timeZone(), true);
    }, RELATIVE_MS);
    addEventListener('keydown', (event) => this.key(event));
    addEventListener('popstate', () => this.render());
    addEventListener('hashchange', () => this.addressChanged());
    this.attempts = 0; // sign-ins begun (the latest wins)
    this.typedAt = -Infinity; // when a key was last typed into a field (event.timeStamp)
  }

  async start() {
    // `serve` prints the page's URL with the token in the fragment, which no request carries:
    // it is traded for the cookie, then dropped from the address bar and this tab's history
    // (the browser's own history keeps the address as it was opened).
    const token = this.addressToken();
    let refused = '';
    if (token) {
      try {
        if (!(await this.trade(token))) return; // a later sign-in took over
      } catch (error) {
        refused = `The token in the address was refused: ${error.message}`;
      }
      if (!refused) this.signedIn();
    }
    // One request first: a signed-out page asks once, not once per snapshot of its view (an
    // earlier cookie may still sign it in when the address's token was refused).
    try {
      await getJSON('api/events', { limit: 1 });
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        this.signedOut(refused); // the stream starts once signed in (`reload`)
        return;
      }
    }
    if (refused) say($('notice'), `${refused}; this page uses its earlier sign-in.`);
    await this.follow(await this.render());
  }

  /** Follow the log after `asOf` (a view's lowest `as_of_seq`; null or undefined: the
   * frontier), loading the shared stream the first time. */
  async follow(asOf) {
    if (!this.streamLoading) {
      this.streamLoading = import('./stream.js').then(({ SharedStream }) => {
        this.stream = new SharedStream(this.hiddenCloseMs, {
          events: (events) => this.view && this.view.onEvents(events),
          status: (state, detail) => this.showStatus(state, detail),
          expired: (body) => this.expired(body),
          reset: () => this.reload(),
          unauthorized: () => this.signedOut(),
        });
        return this.stream;
      });
    }
    try {
      (await this.streamLoading).setCursor(asOf === undefined ? null : asOf);
    } catch (error) {
      this.streamLoading = null; // tried again at the next reload
      say($('error'), `The live stream could not start: ${error.message}`);
    }
  }

  /** The token of the address's fragment ('' when none), dropped at once from the address bar
   * and from this tab's history entry. */
  addressToken() {
    const token = fragmentToken(location.hash);
    if (token) history.replaceState(history.state, '', location.pathname + location.search);
    return token;
  }

  /** The fragment changed (a link pasted into this tab, which does not reload it): sign in
   * with the token it holds. */
  async addressChanged() {
    const token = this.addressToken();
    if (token) await this.signIn(token, 'The token in the address was refused: ');
  }

  /** Trade `token` for the cookie. While the server's failed-authentication limit refuses
   * this address (429), the token is kept and tried again once its `Retry-After` has passed,
   * counting down in the sign-in box. True once signed in; false when a later sign-in took
   * over meanwhile; throws any other refusal. */
  async trade(token) {
    const attempt = ++this.attempts;
    for (;;) {
      try {
        await signIn(token);
      } catch (error) {
        if (attempt !== this.attempts) return false;
        if (!(error instanceof ApiError && error.status === 429)) {
          say($('login-wait'), '');
          throw error;
        }
        await this.wait(error.retryAfterS, attempt);
        if (attempt !== this.attempts) return false;
        continue;
      }
      if (attempt !== this.attempts) return false;
      say($('login-wait'), '');
      return true;
    }
  }

  /** Signed out until `seconds` have passed (at least 1), counting them down in the one line of
   * the sign-in box; ends early when a later sign-in (`attempt` no longer the latest) began. */
  wait(seconds, attempt) {
    this.signedOut();
    this.showStatus('signed-out', 'too many failed authentications from this address');
    const until = Date.now() + Math.max(1, Number(seconds) || 1) * 1000;
    return new Promise((resolve) => {
      const tick = () => {
        const left = Math.ceil((until - Date.now()) / 1000);
        if (attempt !== this.attempts || left <= 0) {
          if (attempt === this.attempts) say($('login-wait'), 'Signing in with the token this page was given…');
          resolve();
          return;
        }
        say($('login-wait'), `Too many failed sign-ins from this address: the server refuses it for now. This page keeps the token it was given and signs in with it in ${left} s.`);
        setTimeout(tick, Math.min(1000, until - Date.now() - (left - 1) * 1000));
      };
      tick();
    });
  }

  /** `s`, `f` and `c` open the sessions, the feed and the consumers, `/` the search box; not while typing (in a
   * field, or within a second of the last key typed into one: a filter that redraws the view on
   * its first letter leaves the next ones to the page), nor with a modifier (the browser's). */
  key(event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    const target = event.target;
    const typing = target && target.closest && target.closest('input, select, textarea, [contenteditable]');
    if (typing || event.timeStamp - this.typedAt < TYPING_MS) {
      this.typedAt = event.timeStamp;
      return;
    }
    if (event.key === '/') {
      event.preventDefault();
      $('search-box').focus();
    } else if (Object.hasOwn(KEYS, event.key) && !this.isSignedOut) {
      this.navigate({ view: KEYS[event.key] });
    }
  }

  /** Show the view the URL names; the lowest `as_of_seq` of its snapshots (null: none). */
  async render() {
    if (this.view) this.view.stop();
    if (this.isSignedOut) return null;
    const params = new URLSearchParams(location.search);
    const name = Object.hasOwn(VIEWS, params.get('view') || '') ? params.get('view') : 'sessions';
    if (name === 'search') $('search-box').value = params.get('q') || '';
    this.view = new VIEWS[name](this, params);
    $('view').replaceChildren(this.view.node);
    document.title = `${name} · session-journal`;
    for (const [id, view] of [['nav-sessions', 'sessions'], ['nav-feed', 'feed'], ['nav-consumers', 'consumers']]) {
      if (view === name) $(id).setAttribute('aria-current', 'page');
      else $(id).removeAttribute('aria-current');
    }
    return this.run(this.view.load());
  }

  /** Go to the view of `query` (empty values left out), keeping the history. */
  navigate(query) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) if (value) params.set(key, value);
    history.pushState(null, '', `?${params}`);
    this.render();
  }

  /** `promise`'s value; on failure the error is shown (never an empty view) and null given.
   * What a view left meanwhile asked for changes nothing on the page. */
  async run(promise) {
    if (this.isSignedOut) return null; // nothing is asked until signed in again
    const { view } = this;
    try {
      const value = await promise;
      if (view === this.view) say($('error'), '');
      return value;
    } catch (error) {
      if (view !== this.view) return null;
      if (error instanceof ApiError && error.status === 401) {
        this.signedOut();
      } else {
        say($('error'), `The request failed: ${error.message}`);
      }
      return null;
    }
  }

  showStatus(state, detail) {
    const node = $('connection');
    node.dataset.state = state;
    node.textContent = STATUS_TEXT[state] || state;
    node.title = detail || 'The live stream';
  }

  async expired(body) {
    if (body.code === 'cursor_ahead') {
      this.showStatus('expired', 'the server\'s log is behind this page');
      say($('notice'), 'The server\'s log is behind what this page had read (another database, or a restored backup); the page reloaded its views and follows on from there.');
      await this.reload();
      return;
    }
    const cursor = Number(body.cursor);
    const through = Number(body.pruned_through);
    const range = Number.isFinite(cursor) && Number.isFinite(through) && through > cursor
      ? `Events ${cursor + 1}–${through} were pruned`
      : 'Events this page had not read yet were pruned';
    this.showStatus('expired', 'events after the cursor were pruned');
    say($('notice'), `${range} before this page read them; it reloaded its views and follows on from there.`);
    await this.reload();
  }

  /** Read the view again and follow from its snapshots' lowest `as_of_seq`. */
  async reload() {
    await this.follow(await this.render());
  }

  signedOut(message) {
    this.isSignedOut = true;
    if (this.view) this.view.stop();
    this.showStatus('signed-out', 'the token was refused or is missing');
    $('login').hidden = false;
    say($('login-error'), message || '');
  }

  /** The sign-in box put away. */
  signedIn() {
    this.isSignedOut = false;
    $('login').hidden = true;
    $('login-token').value = '';
    say($('login-error'), '');
  }

  /** Sign in with `token` (from the form, or the address: `refusal` prefixes the error), then
   * read the view again and open the stream. */
  async signIn(token, refusal = '') {
    if (!token) return;
    try {
      if (!(await this.trade(token))) return;
    } catch (error) {
      const text = `${refusal}${error.message}`;
      if (this.isSignedOut) say($('login-error'), text);
      else say($('notice'), `${text}; this page uses its earlier sign-in.`);
      return;
    }
    this.signedIn();
    await this.reload();
    if (this.stream) this.stream.resume();
  }
}

new App().start();
