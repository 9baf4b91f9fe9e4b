/**
 * Times as people read them. `now` is passed in so a view model (and a test) decides what
 * "today" is; the browser's locale decides the format.
 */

const timeOfDay = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const dayAndTime = new Intl.DateTimeFormat(undefined, {
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
});

/** "14:05" today, "Mar 3, 14:05" on another day. */
export function formatTime(ms: number, now: number = Date.now()): string {
  const date = new Date(ms);
  return date.toDateString() === new Date(now).toDateString() ? timeOfDay.format(date) : dayAndTime.format(date);
}

/** "just now", "5 min ago", "3 h ago", "in 20 min", else the date. */
export function formatRelative(ms: number, now: number = Date.now()): string {
  const minutes = Math.round((ms - now) / 60_000);
  const size = Math.abs(minutes);
  if (size < 1) return "just now";
  const amount = size < 60 ? `${size} min` : size < 48 * 60 ? `${Math.round(size / 60)} h` : null;
  if (amount === null) return formatTime(ms, now);
  return minutes < 0 ? `${amount} ago` : `in ${amount}`;
}

/** The ISO form for a `<time datetime>` attribute. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
