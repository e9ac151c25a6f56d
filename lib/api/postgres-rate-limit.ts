import type { SqlRunner } from "@/lib/db/database.ts";
import { WINDOW_MS, type Bucket, type ChargedColumns, type RateLimiter, type RateLimitResult, type StatementCharge } from "./rate-limit.ts";

/**
 * The same sliding window as MemoryRateLimiter, kept in PostgreSQL so every
 * server process on the database shares one budget per user (the default
 * with DATABASE_URL and no Upstash; docs/operations.md). One statement per
 * request, or none of its own with an API key (see `charging`): the upsert's row lock makes check-and-count atomic across
 * processes, and a refused request is not counted. When the database cannot
 * answer, the request passes (and is logged), as with Upstash.
 */
export class PostgresRateLimiter implements RateLimiter {
  private lastFailureLog = 0;
  private prunedWindow = 0;

  constructor(
    private readonly caps: Record<Bucket, number>,
    // Plain statements, not Prisma's: one runs on every request, and through Prisma's query engine
    // it cost about three times the server CPU (0.3 against 0.1 ms, PostgreSQL, 2026-11-28).
    private readonly sql: () => Promise<SqlRunner>,
    private readonly now: () => number = Date.now,
  ) {}

  async limit(bucket: Bucket, identity: string): Promise<RateLimitResult> {
    const charge = this.charging(bucket);
    try {
      const sql = await this.sql();
      const statement = charge.statement(`SELECT $1::text AS identity`, [identity]);
      const [row] = await sql.query<ChargedColumns>(statement.text, statement.params);
      return charge.settle(row!, sql)!;
    } catch (error) {
      if (charge.now - this.lastFailureLog > 60_000) {
        this.lastFailureLog = charge.now;
        console.error("rate limiter: the PostgreSQL counters are unavailable, letting requests through", error);
      }
      return { success: true, limit: charge.cap, remaining: charge.cap, reset: charge.reset, retryAfterMs: 0 };
    }
  }

  /**
   * One call against `bucket`, counted inside another statement that reads who calls: withAuth's
   * API-key lookup charges the key's user in the same round trip (one statement less on every
   * request, issue 16). `source` is a SELECT of at most one row whose text column `identity` names
   * who is charged; NULL (a revoked or expired key) charges nobody. The row comes back with the
   * limiter's columns added, which `settle` reads (undefined: nothing was charged).
   */
  charging(bucket: Bucket): StatementCharge {
    const now = this.now();
    const cap = this.caps[bucket];
    const start = Math.floor(now / WINDOW_MS) * WINDOW_MS;
    const reset = start + WINDOW_MS;
    const overlap = 1 - (now - start) / WINDOW_MS;
    return {
      now,
      cap,
      reset,
      statement: (source, params) => {
        const p = (i: number) => `$${params.length + i}`;
        // The row lock of the upsert makes check-and-count atomic across processes; a refused call is not counted.
        return {
          text: `WITH src AS MATERIALIZED (${source}),
           prev AS (
             SELECT COALESCE((SELECT w.count FROM rate_limit_windows w, src WHERE w.key = ${p(1)} || src.identity AND w.window_start = ${p(3)}::bigint), 0) AS n
           ),
           charged AS (
             INSERT INTO rate_limit_windows AS w (key, window_start, count, allowed)
             SELECT ${p(1)} || src.identity, ${p(2)}::bigint, CASE WHEN floor(prev.n * ${p(4)}::float8) < ${p(5)}::int THEN 1 ELSE 0 END,
                    floor(prev.n * ${p(4)}::float8) < ${p(5)}::int
             FROM src, prev
             WHERE src.identity IS NOT NULL
             ON CONFLICT (key, window_start) DO UPDATE
             SET count = w.count + CASE WHEN w.count + floor((SELECT n FROM prev) * ${p(4)}::float8) < ${p(5)}::int THEN 1 ELSE 0 END,
                 allowed = w.count + floor((SELECT n FROM prev) * ${p(4)}::float8) < ${p(5)}::int
             RETURNING w.count, w.allowed, (SELECT n FROM prev) AS previous
           )
           SELECT src.*, charged.count AS rl_count, charged.allowed AS rl_allowed, charged.previous AS rl_previous
             FROM src LEFT JOIN charged ON true`,
          params: [...params, `${bucket}:`, start, start - WINDOW_MS, overlap, cap],
        };
      },
      settle: (row, sql) => {
        if (row.rl_allowed === null || row.rl_allowed === undefined) return undefined;
        this.prune(sql, start);
        const used = Math.floor(Number(row.rl_previous) * overlap) + Number(row.rl_count);
        return { success: row.rl_allowed, limit: cap, remaining: Math.max(0, cap - used), reset, retryAfterMs: reset - now };
      },
    };
  }

  async peek(bucket: Bucket, identity: string): Promise<RateLimitResult> {
    const now = this.now();
    const cap = this.caps[bucket];
    const start = Math.floor(now / WINDOW_MS) * WINDOW_MS;
    const reset = start + WINDOW_MS;
    const key = `${bucket}:${identity}`;
    try {
      const sql = await this.sql();
      const [row] = await sql.query<{ current: number; previous: number }>(
        `SELECT COALESCE(SUM(count) FILTER (WHERE window_start = $2::bigint), 0)::int AS current,
                COALESCE(SUM(count) FILTER (WHERE window_start = $3::bigint), 0)::int AS previous
           FROM rate_limit_windows WHERE key = $1 AND window_start IN ($2::bigint, $3::bigint)`,
        [key, start, start - WINDOW_MS],
      );
      const used = Math.floor(Number(row!.previous) * (1 - (now - start) / WINDOW_MS)) + Number(row!.current);
      return { success: used < cap, limit: cap, remaining: Math.max(0, cap - used), reset, retryAfterMs: reset - now };
    } catch {
      // As limit() does when the database cannot answer: let it through (limit() logs the outage).
      return { success: true, limit: cap, remaining: cap, reset, retryAfterMs: 0 };
    }
  }

  async refund(bucket: Bucket, identity: string, calls = 1, windowEnd?: number): Promise<void> {
    const start = windowEnd === undefined ? Math.floor(this.now() / WINDOW_MS) * WINDOW_MS : windowEnd - WINDOW_MS;
    try {
      const sql = await this.sql();
      // The window the calls were charged in, this one or the previous one when the minute turned since;
      // the count is read under the row's lock, so concurrent refunds never take it below nothing (a
      // subquery picking the window alone let them all take one from a window holding 1).
      await sql.query(`UPDATE rate_limit_windows SET count = count - LEAST(count, $3::int) WHERE key = $1 AND window_start = $2::bigint AND count > 0`, [
        `${bucket}:${identity}`,
        start,
        calls,
      ]);
    } catch (error) {
      // As a charge the database could not count: the calls keep their tokens, nothing fails.
      console.error("rate limiter: could not give back calls", error);
    }
  }

  /** Once per window and process, in the background: windows before the previous one are no longer read. */
  private prune(sql: SqlRunner, start: number): void {
    if (start === this.prunedWindow) return;
    this.prunedWindow = start;
    sql.query(`DELETE FROM rate_limit_windows WHERE window_start < $1::bigint`, [start - WINDOW_MS]).catch((error: unknown) => {
      console.error("rate limiter: could not prune old windows", error);
    });
  }
}
