import { z } from "zod";

/** The instants PostgreSQL's timestamptz reads back: years 1 to 9999 (it has no year 0). */
export const EARLIEST_INSTANT = Date.parse("0001-01-01T00:00:00.000Z");
export const LATEST_INSTANT = Date.parse("9999-12-31T23:59:59.999Z");

/** `at` moved into the range the database stores (a bound past either end means "everything"/"nothing"). */
export function clampInstant(at: Date): Date {
  return new Date(Math.min(LATEST_INSTANT, Math.max(EARLIEST_INSTANT, at.getTime())));
}

/**
 * An RFC 3339 timestamp with an offset, within years 1–9999 once in UTC: zod alone accepts
 * "0000-01-01T00:00:00Z" (and offsets that push 9999 past its end), which the database refuses.
 */
export function timestampSchema(message: string) {
  return z.iso.datetime({ offset: true, message }).refine((value) => {
    const at = Date.parse(value);
    return at >= EARLIEST_INSTANT && at <= LATEST_INSTANT;
  }, `${message} between years 1 and 9999`);
}
