/**
 * Calendar arithmetic in the caller's time zone (X-Timezone): a zone's offset from UTC at an
 * instant, through Intl (no tz database of our own). Undefined zone = UTC.
 */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let found = formatters.get(timeZone);
  if (!found) {
    found = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    if (formatters.size > 500) formatters.clear();
    formatters.set(timeZone, found);
  }
  return found;
}

/** Milliseconds to add to a UTC instant to get the wall-clock time in `timeZone` (as if it were UTC). */
export function zoneOffsetMs(at: Date, timeZone: string | undefined): number {
  if (!timeZone || timeZone === "UTC") return 0;
  const parts = Object.fromEntries(formatter(timeZone).formatToParts(at).map((part) => [part.type, part.value]));
  // Date.UTC would read a year 0-99 as 1900-1999 (and take this zone's offset from that century).
  const wall = new Date(0);
  wall.setUTCFullYear(Number(parts.year), Number(parts.month) - 1, Number(parts.day));
  wall.setUTCHours(Number(parts.hour), Number(parts.minute), Number(parts.second));
  return wall.getTime() - Math.floor(at.getTime() / 1000) * 1000;
}

/** The instant as wall-clock time in the zone, expressed as a UTC Date (for getUTC* calendar maths). */
export function toZoneWallClock(at: Date, timeZone: string | undefined): Date {
  return new Date(at.getTime() + zoneOffsetMs(at, timeZone));
}

/** Inverse of toZoneWallClock: the real instant of a wall-clock time in the zone. */
export function fromZoneWallClock(wall: Date, timeZone: string | undefined): Date {
  // The offset at the target instant can differ from the one at `wall` across a DST change; one correction settles it.
  const guess = new Date(wall.getTime() - zoneOffsetMs(wall, timeZone));
  return new Date(wall.getTime() - zoneOffsetMs(guess, timeZone));
}
