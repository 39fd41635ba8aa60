// Times on the page: one format everywhere, `2026-12-07 18:20:31 UTC` or, in the browser's
// zone, `2026-12-07 19:20:31 UTC+01:00`, and relative times (`41 s ago`) where they read better.
// Pure: the zone and the time are arguments (the page keeps the zone in `localStorage`).

/** The zones the page offers. */
export const ZONES = ['utc', 'local'];

const pad = (number, width = 2) => String(number).padStart(width, '0');

/** `minutes` east of UTC as `UTC`, `UTC+01:00`, `UTC-05:30`. */
export function zoneName(minutes) {
  if (minutes === 0) return 'UTC';
  const sign = minutes > 0 ? '+' : '-';
  const size = Math.abs(minutes);
  return `UTC${sign}${pad(Math.floor(size / 60))}:${pad(size % 60)}`;
}

/** `ms` (since the epoch) as `YYYY-MM-DD HH:MM:SS` and its zone, in `zone` (`utc` or
 * `local`, the browser's); '' for a value that is no time. `withMs` adds the milliseconds. */
export function formatTime(ms, zone, withMs = false) {
  const date = new Date(ms);
  if (ms === null || ms === undefined || ms === '' || !Number.isFinite(date.getTime())) return '';
  const local = zone === 'local';
  const offset = local ? -date.getTimezoneOffset() : 0;
  const shifted = new Date(date.getTime() + offset * 60_000); // its UTC fields are the zone's
  const text = `${pad(shifted.getUTCFullYear(), 4)}-${pad(shifted.getUTCMonth() + 1)}-${pad(shifted.getUTCDate())}`
    + ` ${pad(shifted.getUTCHours())}:${pad(shifted.getUTCMinutes())}:${pad(shifted.getUTCSeconds())}`
    + (withMs ? `.${pad(shifted.getUTCMilliseconds(), 3)}` : '');
  return `${text} ${zoneName(offset)}`;
}

/** How long ago `ms` was at `now`: `just now`, `41 s ago`, `5 min ago`, `3 h ago`, `2 d ago`
 * (a time ahead of `now`, a clock apart: `in 3 s`); '' for a value that is no time. */
export function relativeTime(ms, now) {
  const value = Number(ms);
  if (ms === null || ms === undefined || ms === '' || !Number.isFinite(new Date(value).getTime())) return '';
  const seconds = Math.round((now - value) / 1000);
  const size = Math.abs(seconds);
  if (size < 1) return 'just now';
  let text;
  if (size < 60) text = `${size} s`;
  else if (size < 3_600) text = `${Math.floor(size / 60)} min`;
  else if (size < 86_400) text = `${Math.floor(size / 3_600)} h`;
  else text = `${Math.floor(size / 86_400)} d`;
  return seconds > 0 ? `${text} ago` : `in ${text}`;
}

/** A duration of `ms` as `850 ms`, `41 s`, `3 min 20 s`, `2 h 5 min`. */
export function duration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 999.5) return `${Math.round(ms)} ms`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3_600) {
    const rest = seconds % 60;
    return `${Math.floor(seconds / 60)} min${rest ? ` ${rest} s` : ''}`;
  }
  const minutes = Math.floor((seconds % 3_600) / 60);
  return `${Math.floor(seconds / 3_600)} h${minutes ? ` ${minutes} min` : ''}`;
}

/** A time given as ISO text (`2026-12-07T18:20:31.123Z`), or ms, as ms (NaN: no time). */
export function toMs(value) {
  return typeof value === 'number' ? value : Date.parse(value);
}
