// A minimal DOM and fetch for loading the page's view modules under Node's test runner (not a
// test itself): elements that hold children and text, a fetch whose answers the test gives.
class FakeElement {
  constructor(tag) {
    this.tagName = tag;
    this.children = [];
    this.attributes = {};
    this.dataset = {};
    this.ownText = '';
    this.hidden = false;
    this.disabled = false;
  }

  setAttribute(key, value) { this.attributes[key] = String(value); }
  removeAttribute(key) { delete this.attributes[key]; }
  addEventListener() {}
  contains() { return false; }
  querySelector() { return null; }
  focus() {}
  append(...nodes) { for (const node of nodes) this.children.push(typeof node === 'string' ? { text: node } : node); }
  prepend(...nodes) { // a fragment gives its children
    this.children.unshift(...nodes.flatMap((node) => (node.tagName === '#fragment' ? node.children : [node])));
  }
  replaceChildren(...nodes) { this.children = []; this.append(...nodes); }
  get childElementCount() { return this.children.length; }
  get lastElementChild() { return this.children.at(-1) || null; }
  get lastChild() { return this.children.length ? { remove: () => this.children.pop() } : null; }
  get firstChild() { return this.children.length ? { remove: () => this.children.shift() } : null; }
  set textContent(value) { this.ownText = String(value); this.children = []; }
  get textContent() { return this.ownText + this.children.map((child) => child.text ?? child.textContent ?? '').join(''); }
  set className(value) { this.attributes.class = value; }
}

globalThis.document = {
  createElement: (tag) => new FakeElement(tag),
  createElementNS: (_, tag) => new FakeElement(tag),
  createDocumentFragment: () => new FakeElement('#fragment'),
  visibilityState: 'visible',
  querySelectorAll: () => [],
  activeElement: null,
};
globalThis.performance.mark = () => {};
globalThis.localStorage = { getItem: () => null, setItem: () => {} };
globalThis.setInterval = () => 0; // the views' timers: the test's process must end

/** The requests made and not answered yet: `{url, answer(body)}`. */
export const requests = [];
globalThis.fetch = (url) => new Promise((resolve) => {
  requests.push({
    url: String(url),
    answer: (body) => resolve({ ok: true, status: 200, json: async () => body, headers: { get: () => null } }),
  });
});

const tick = () => new Promise((resolve) => setTimeout(resolve, 1));

/** Answer the oldest request whose URL holds `part` with `body`. */
export async function answer(part, body) {
  for (let i = 0; i < 100 && !requests.some((request) => request.url.includes(part)); i += 1) await tick();
  const index = requests.findIndex((request) => request.url.includes(part));
  if (index < 0) throw new Error(`no request to ${part}`);
  const [request] = requests.splice(index, 1);
  request.answer(body);
  await tick();
}
