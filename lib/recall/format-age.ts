const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** "just now", "1 minute ago", "N hours ago", "N days ago", "N months ago", "N years ago" (decisions.md). */
export function formatAge(createdAt: Date, now: Date): string {
  const elapsed = Math.max(0, now.getTime() - createdAt.getTime());
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"} ago`;
  if (elapsed < MINUTE) return "just now";
  if (elapsed < HOUR) return unit(Math.floor(elapsed / MINUTE), "minute");
  if (elapsed < DAY) return unit(Math.floor(elapsed / HOUR), "hour");
  if (elapsed < 30 * DAY) return unit(Math.floor(elapsed / DAY), "day");
  if (elapsed < 365 * DAY) return unit(Math.floor(elapsed / (30 * DAY)), "month");
  return unit(Math.floor(elapsed / (365 * DAY)), "year");
}
