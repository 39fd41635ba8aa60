// Building the page's elements. Text from the server (agent and user text, ids, errors) only
// ever reaches the document as text: `textContent` or a Text node (`append` of a string).
// Nothing here parses HTML; the page's policy (Trusted Types with no policy) would refuse it.

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

/** Show `node` holding `text`, or hide it when `text` is empty. */
export function say(node, text) {
  node.textContent = text || '';
  node.hidden = !text;
}

/** A time in milliseconds since the epoch, as ISO text (UTC). */
export function when(ms) {
  const date = new Date(ms);
  return Number.isFinite(date.getTime()) ? date.toISOString().replace('T', ' ').slice(0, 23) : '';
}

/** At most `limit` characters of `text`, with an ellipsis when cut. */
export function cut(text, limit) {
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

/** A button that looks like a link, calling `action` (no URL is built from event data). */
export function linkButton(text, action) {
  return el('button', { type: 'button', class: 'link', onclick: action, text });
}
