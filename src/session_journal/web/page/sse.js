// A parser of Server-Sent Events, apart from any transport: text in, events out, as the HTML
// standard's "interpreting an event stream" says. The stream's transport (transport.js) feeds it
// the response's decoded text chunk by chunk; Node's test runner feeds it strings.

/** Parses an event stream's text, fed in chunks of any size (a line or a CRLF may be split
 * between two chunks). */
export class SseParser {
  constructor() {
    this.buffer = ''; // the text after the last line end
    this.skipLf = false; // the last chunk ended with CR: a leading LF ends no further line
    this.event = '';
    this.data = [];
    /** The last event id the stream set (`id:`), '' before any. */
    this.lastEventId = '';
    /** The reconnection delay the stream asked for (`retry:`, ms), null before any. */
    this.retryMs = null;
  }

  /** The events `text` completes, in order: `{event, data, id}` (`event` 'message' when the
   * stream named none; `data` its `data:` lines joined by LF). */
  push(text) {
    if (!text) return []; // nothing: a CR at the last chunk's end still waits for its LF
    let chunk = text;
    if (this.skipLf && chunk.startsWith('\n')) chunk = chunk.slice(1);
    this.skipLf = chunk.endsWith('\r');
    const lines = (this.buffer + chunk).split(/\r\n|\r|\n/);
    this.buffer = lines.pop();
    const events = [];
    for (const line of lines) {
      const event = this.line(line);
      if (event) events.push(event);
    }
    return events;
  }

  /** One line: a field, a comment, or (empty) the end of an event. */
  line(line) {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return null; // a comment: heartbeats
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.lastEventId = value;
    else if (field === 'retry' && /^[0-9]+$/.test(value)) this.retryMs = Number(value);
    return null; // any other field is ignored
  }

  dispatch() {
    const event = this.event || 'message';
    const { data } = this;
    this.event = '';
    this.data = [];
    if (!data.length) return null; // an event with no data is not dispatched
    return { event, data: data.join('\n'), id: this.lastEventId };
  }
}
