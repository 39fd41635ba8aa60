// The event rate the feed draws: events per minute over the last minutes, from
// `GET api/events/rate`, then kept current by the events the stream brings. Pure: the caller
// gives the time.

/** Events per minute in a window of whole minutes that ends with the current one. */
export class RateSeries {
  /** `rate`: the answer of `GET api/events/rate` (`start_ms`, `counts`, `minute_ms`,
   * `as_of_seq`: events up to it are counted already). */
  constructor(rate) {
    this.minuteMs = rate.minute_ms;
    this.startMs = rate.start_ms;
    this.counts = [...rate.counts];
    this.asOfSeq = rate.as_of_seq;
  }

  /** Count `events` the stream brought (those above `as_of_seq` only, each in the minute of
   * its `recorded_at_ms`; outside the window: not counted), after moving the window to `now`. */
  add(events, now) {
    this.advance(now);
    for (const event of events) {
      if (event.seq <= this.asOfSeq) continue;
      this.asOfSeq = event.seq;
      const minute = Math.floor((event.recorded_at_ms - this.startMs) / this.minuteMs);
      if (minute >= 0 && minute < this.counts.length) this.counts[minute] += 1;
    }
  }

  /** Move the window so that its last minute is the one holding `now` (minutes that went by
   * start at 0); never backwards. */
  advance(now) {
    const size = this.counts.length;
    const last = this.startMs + (size - 1) * this.minuteMs;
    const steps = Math.floor((now - last) / this.minuteMs);
    if (steps <= 0) return;
    const kept = this.counts.slice(Math.min(steps, size));
    this.counts = [...kept, ...new Array(size - kept.length).fill(0)];
    this.startMs += steps * this.minuteMs;
  }

  /** The minutes, oldest first: `{startMs, count}`. */
  minutes() {
    return this.counts.map((count, index) => ({ startMs: this.startMs + index * this.minuteMs, count }));
  }
}

/** The bars of a chart `width` × `height` for `counts` (one bar a count, oldest on the left,
 * a gap of `gap` between bars): `{x, y, width, height}` each, the tallest `height` high (an empty
 * window: every bar 0 high), and the scale's top. */
export function bars(counts, width, height, gap = 2) {
  const top = Math.max(1, ...counts);
  const slot = width / Math.max(1, counts.length);
  return {
    top,
    bars: counts.map((count, index) => {
      const tall = (count / top) * height;
      return { x: index * slot + gap / 2, y: height - tall, width: Math.max(0, slot - gap), height: tall };
    }),
  };
}
