// Building the page's elements. Text from the server (agent and user text, ids, errors) only
// ever reaches the document as text: `textContent` or a Text node (`append` of a string).
// Nothing here parses HTML; the page's policy (Trusted Types with no policy) would refuse it.

import { formatTime, relativeTime, toMs, ZONES } from './time.js';

const ZONE_KEY = 'session-journal.time-zone';
let chosenZone = 'utc'; // the zone chosen in this page, where `localStorage` refuses to keep it

/** An element: `props` are constant attributes of the page's own, `text`, `class`, or `on*`
 * listeners; `children` are nodes or strings (appended as text). */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = String(value);
    else if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null && child !== false) node.append(child);
  }
  return node;
}

const SVG = 'http://www.w3.org/2000/svg';

/** An SVG element: `attrs` are its attributes (numbers written as they are), `children` nodes
 * or strings (appended as text). */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null && child !== false) node.append(child);
  }
  return node;
}

/** Show `node` holding `text`, or hide it when `text` is empty. */
export function say(node, text) {
  node.textContent = text || '';
  node.hidden = !text;
}

/** The zone times are shown in (`utc` or `local`), as this browser keeps it (`localStorage`
 * may be refused: UTC then, for this page only). */
export function timeZone() {
  try {
    const kept = localStorage.getItem(ZONE_KEY);
    if (ZONES.includes(kept)) return kept;
  } catch {
    // storage refused: the page's own choice
  }
  return chosenZone;
}

/** Show times in `zone` from now on, in every tab of this browser, and redraw this page's. */
export function setTimeZone(zone) {
  chosenZone = ZONES.includes(zone) ? zone : 'utc';
  try {
    localStorage.setItem(ZONE_KEY, chosenZone);
  } catch {
    // kept for this page only (`chosenZone`)
  }
  redrawTimes(chosenZone);
}

function drawTime(node, zone, now) {
  const ms = Number(node.dataset.ms);
  const absolute = formatTime(ms, zone, true);
  if (node.dataset.relative !== undefined) {
    node.textContent = relativeTime(ms, now);
    node.title = absolute;
  } else {
    node.textContent = formatTime(ms, zone);
    node.title = absolute;
  }
}

/** A `<time>` of `value` (ms since the epoch, or ISO text) in the page's zone, the exact time
 * with milliseconds on hover; `relative`: `41 s ago` instead (kept current by `redrawTimes`). */
export function timeNode(value, relative = false) {
  const ms = toMs(value);
  if (!Number.isFinite(new Date(ms).getTime())) {
    return el('span', { class: 'muted' }, typeof value === 'string' && value ? value : '—');
  }
  const node = el('time', { datetime: new Date(ms).toISOString(), 'data-ms': String(ms) });
  if (relative) node.dataset.relative = '';
  drawTime(node, timeZone(), Date.now());
  return node;
}

/** Draw every time on the page again (the zone changed, or relative times went by). */
export function redrawTimes(zone = timeZone(), relativeOnly = false) {
  const now = Date.now();
  const selector = relativeOnly ? 'time[data-relative]' : 'time[data-ms]';
  for (const node of document.querySelectorAll(selector)) drawTime(node, zone, now);
}

/** At most `limit` characters of `text`, with an ellipsis when cut. */
export function cut(text, limit) {
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

/** A button that looks like a link, calling `action` (no URL is built from event data). */
export function linkButton(text, action) {
  return el('button', { type: 'button', class: 'link', onclick: action, text });
}
