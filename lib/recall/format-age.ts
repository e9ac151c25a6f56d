import { toZoneWallClock } from "./zone-offset.ts";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * "just now", "1 minute ago", "N hours ago", "N days ago", "N months ago", "N years ago" (decisions.md).
 * Past a day, days are calendar days in the caller's zone (X-Timezone, else UTC): Monday 23:00
 * reads "2 days ago" on Wednesday at 01:00, although only 26 hours have passed.
 */
export function formatAge(createdAt: Date, now: Date, timeZone?: string): string {
  const elapsed = Math.max(0, now.getTime() - createdAt.getTime());
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"} ago`;
  if (elapsed < MINUTE) return "just now";
  if (elapsed < HOUR) return unit(Math.floor(elapsed / MINUTE), "minute");
  if (elapsed < DAY) return unit(Math.floor(elapsed / HOUR), "hour");
  if (elapsed < 30 * DAY) return unit(Math.max(1, calendarDays(createdAt, now, timeZone)), "day");
  if (elapsed < 365 * DAY) return unit(Math.floor(elapsed / (30 * DAY)), "month");
  return unit(Math.floor(elapsed / (365 * DAY)), "year");
}

function calendarDays(from: Date, to: Date, timeZone: string | undefined): number {
  const day = (at: Date) => Math.floor(toZoneWallClock(at, timeZone).getTime() / DAY);
  return day(to) - day(from);
}
