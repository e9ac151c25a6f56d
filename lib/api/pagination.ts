import { z } from "zod";
import { ApiError } from "./errors.ts";
import { sign, verify } from "./server-secret.ts";

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;
/**
 * Characters of a `cursor` a list takes: every cursor this server issues fits (the longest signs an
 * agent-sessions list of 200 escaped control characters, about 1,800), and a longer one, which can only
 * be invalid, is refused by its length before it is decoded and its signature checked.
 */
export const MAX_CURSOR_LENGTH = 4096;
export const cursorSchema = z.string().max(MAX_CURSOR_LENGTH, `cursor is at most ${MAX_CURSOR_LENGTH} characters`);

/** limit: default 20, clamped to 100; anything not a whole number ≥ 1 is invalid_limit. */
export function parseLimit(raw: string | null | undefined, fallback = DEFAULT_LIMIT, max = MAX_LIMIT): number {
  if (raw === null || raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ApiError("invalid_limit", "limit must be a whole number of at least 1");
  const value = Number(raw);
  if (value < 1) throw new ApiError("invalid_limit", "limit must be a whole number of at least 1");
  return Math.min(value, max);
}

/**
 * Cursors are signed so a client can neither forge nor edit one, and carry the
 * list they belong to and the user they were issued to: any other use is invalid_cursor.
 */
export function encodeCursor(secret: Buffer, list: string, userId: string, position: unknown): string {
  const payload = Buffer.from(JSON.stringify({ l: list, u: userId, p: position })).toString("base64url");
  return `${payload}.${sign(secret, payload)}`;
}

export function decodeCursor<T>(
  secret: Buffer,
  list: string,
  userId: string,
  cursor: string,
  positionSchema: z.ZodType<T>,
): T {
  const invalid = () => new ApiError("invalid_cursor", "cursor is not valid for this list; start again without it");
  const [payload, signature, extra] = cursor.split(".");
  if (!payload || !signature || extra !== undefined || !verify(secret, payload, signature)) throw invalid();
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
  } catch {
    throw invalid();
  }
  const envelope = z.object({ l: z.literal(list), u: z.literal(userId), p: positionSchema }).safeParse(decoded);
  if (!envelope.success) throw invalid();
  return envelope.data.p as T;
}

/** Builds `{ [key]: items, next_cursor, has_more }` from limit+1 fetched rows. */
export function page<T, K extends string>(
  key: K,
  rows: T[],
  limit: number,
  cursorFor: (last: T) => string,
): { [P in K]: T[] } & { next_cursor: string; has_more: boolean } {
  const hasMore = rows.length > limit;
  const items = hasMore ? rows.slice(0, limit) : rows;
  const last = items[items.length - 1];
  return {
    [key]: items,
    next_cursor: hasMore && last !== undefined ? cursorFor(last) : "",
    has_more: hasMore,
  } as { [P in K]: T[] } & { next_cursor: string; has_more: boolean };
}
