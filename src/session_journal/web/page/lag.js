// The consumers view's pure parts: each consumer's lag over the polls since the page opened,
// the sparkline of it, and its state in words. Pure: the caller gives the time.

import { duration } from './time.js';

/** The lag (seqs behind) of each consumer at each poll, the last `polls` polls, at most
 * `consumers` consumers (those no longer listed are forgotten). */
export class LagHistory {
  constructor(polls = 120, consumers = 1000) {
    this.polls = polls;
    this.consumers = consumers;
    this.series = new Map(); // name -> [lag, ...], oldest first
  }

  /** Take one poll's consumers (`GET api/consumers`' `consumers`). */
  add(statuses) {
    const listed = new Set();
    for (const status of statuses.slice(0, this.consumers)) {
      listed.add(status.name);
      const series = this.series.get(status.name) || [];
      series.push(Math.max(0, Number(status.lag) || 0));
      if (series.length > this.polls) series.splice(0, series.length - this.polls);
      this.series.set(status.name, series);
    }
    for (const name of [...this.series.keys()]) if (!listed.has(name)) this.series.delete(name);
  }

  /** The lags of `name`, oldest first (empty when never polled). */
  of(name) {
    return this.series.get(name) || [];
  }
}

/** The points of a sparkline `width` × `height` of `values` (oldest on the left; the highest at
 * the top, 0 at the bottom): an SVG `points` attribute, '' for no values. */
export function sparkline(values, width, height) {
  if (!values.length) return '';
  const top = Math.max(1, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  return values.map((value, index) => {
    const x = values.length > 1 ? index * step : width;
    const y = height - (value / top) * height;
    return `${x.toFixed(1)},${y.toFixed(1)}`;
  }).join(' ');
}

/** A consumer's state in words (after its `kind`, which the view shows as a badge when
 * `stuck`), and a word for its colour (`stuck`, `behind`, `caught-up`). */
export function consumerState(status) {
  const waiting = Number(status.lag) || 0;
  const events = `${waiting.toLocaleString('en')} event${waiting === 1 ? '' : 's'}`;
  if (status.stuck) {
    return {
      kind: 'stuck',
      text: `no ack for over ${duration(status.stuck_after_s * 1000)} while ${events} wait`,
    };
  }
  if (waiting > 0) {
    return { kind: 'behind', text: `behind by ${events} (${duration(Math.round(status.lag_seconds * 1000))})` };
  }
  return { kind: 'caught-up', text: 'caught up' };
}
