import type { Db } from "@/lib/db/database.ts";
import { WINDOW_MS, type Bucket, type RateLimiter, type RateLimitResult } from "./rate-limit.ts";

/**
 * The same sliding window as MemoryRateLimiter, kept in PostgreSQL so every
 * server process on the database shares one budget per user (the default
 * with DATABASE_URL and no Upstash; docs/operations.md). One statement per
 * request: the upsert's row lock makes check-and-count atomic across
 * processes, and a refused request is not counted. When the database cannot
 * answer, the request passes (and is logged), as with Upstash.
 */
export class PostgresRateLimiter implements RateLimiter {
  private lastFailureLog = 0;
  private prunedWindow = 0;

  constructor(
    private readonly caps: Record<Bucket, number>,
    private readonly db: () => Promise<Db>,
    private readonly now: () => number = Date.now,
  ) {}

  async limit(bucket: Bucket, identity: string): Promise<RateLimitResult> {
    const now = this.now();
    const cap = this.caps[bucket];
    const start = Math.floor(now / WINDOW_MS) * WINDOW_MS;
    const reset = start + WINDOW_MS;
    const overlap = 1 - (now - start) / WINDOW_MS;
    const key = `${bucket}:${identity}`;
    try {
      const db = await this.db();
      const [row] = await db.$queryRaw<{ count: number; allowed: boolean; previous: number }[]>`
        WITH prev AS (
          SELECT COALESCE((SELECT count FROM rate_limit_windows WHERE key = ${key} AND window_start = ${start - WINDOW_MS}::bigint), 0) AS n
        )
        INSERT INTO rate_limit_windows AS w (key, window_start, count, allowed)
        SELECT ${key}, ${start}::bigint, CASE WHEN floor(prev.n * ${overlap}::float8) < ${cap}::int THEN 1 ELSE 0 END,
               floor(prev.n * ${overlap}::float8) < ${cap}::int
        FROM prev
        ON CONFLICT (key, window_start) DO UPDATE
        SET count = w.count + CASE WHEN w.count + floor((SELECT n FROM prev) * ${overlap}::float8) < ${cap}::int THEN 1 ELSE 0 END,
            allowed = w.count + floor((SELECT n FROM prev) * ${overlap}::float8) < ${cap}::int
        RETURNING w.count, w.allowed, (SELECT n FROM prev) AS previous`;
      this.prune(db, start);
      const used = Math.floor(Number(row!.previous) * overlap) + Number(row!.count);
      return { success: row!.allowed, limit: cap, remaining: Math.max(0, cap - used), reset, retryAfterMs: reset - now };
    } catch (error) {
      if (now - this.lastFailureLog > 60_000) {
        this.lastFailureLog = now;
        console.error("rate limiter: the PostgreSQL counters are unavailable, letting requests through", error);
      }
      return { success: true, limit: cap, remaining: cap, reset, retryAfterMs: 0 };
    }
  }

  async peek(bucket: Bucket, identity: string): Promise<RateLimitResult> {
    const now = this.now();
    const cap = this.caps[bucket];
    const start = Math.floor(now / WINDOW_MS) * WINDOW_MS;
    const reset = start + WINDOW_MS;
    const key = `${bucket}:${identity}`;
    try {
      const db = await this.db();
      const [row] = await db.$queryRaw<{ current: number; previous: number }[]>`
        SELECT COALESCE(SUM(count) FILTER (WHERE window_start = ${start}::bigint), 0)::int AS current,
               COALESCE(SUM(count) FILTER (WHERE window_start = ${start - WINDOW_MS}::bigint), 0)::int AS previous
          FROM rate_limit_windows WHERE key = ${key} AND window_start IN (${start}::bigint, ${start - WINDOW_MS}::bigint)`;
      const used = Math.floor(Number(row!.previous) * (1 - (now - start) / WINDOW_MS)) + Number(row!.current);
      return { success: used < cap, limit: cap, remaining: Math.max(0, cap - used), reset, retryAfterMs: reset - now };
    } catch {
      // As limit() does when the database cannot answer: let it through (limit() logs the outage).
      return { success: true, limit: cap, remaining: cap, reset, retryAfterMs: 0 };
    }
  }

  /** Once per window and process, in the background: windows before the previous one are no longer read. */
  private prune(db: Db, start: number): void {
    if (start === this.prunedWindow) return;
    this.prunedWindow = start;
    db.rateLimitWindow.deleteMany({ where: { windowStart: { lt: BigInt(start - WINDOW_MS) } } }).catch((error: unknown) => {
      console.error("rate limiter: could not prune old windows", error);
    });
  }
}
