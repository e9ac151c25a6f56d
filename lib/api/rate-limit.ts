import { Ratelimit } from "@upstash/ratelimit";
import { Redis } from "@upstash/redis";
import { config } from "@/lib/config.ts";
import { getDatabase, type SqlRunner } from "@/lib/db/database.ts";
import { PostgresRateLimiter } from "./postgres-rate-limit.ts";

export type Bucket = "regular" | "heavy" | "light";

export interface RateLimitResult {
  success: boolean;
  limit: number;
  remaining: number;
  /** Unix time (ms) at which the window resets. */
  reset: number;
  /** When refused: milliseconds until the next window. */
  retryAfterMs: number;
}

export interface RateLimiter {
  limit(bucket: Bucket, identity: string): Promise<RateLimitResult>;
  /** What `limit` would answer now, without counting a call (success: one more call would pass). */
  peek(bucket: Bucket, identity: string): Promise<RateLimitResult>;
  /**
   * Gives back `calls` calls `limit` counted, for calls refused before they ran anything (MCP asks and
   * recalls past their request's result budget): the agent is told to retry, and must not pay twice. One
   * write however many. Taken from the window that ended at `windowEnd` (the `reset` their charge
   * answered; default the current one); a window past is left as it is. Never throws.
   */
  refund?(bucket: Bucket, identity: string, calls?: number, windowEnd?: number): Promise<void>;
  /** A limiter kept in the database: `limit` done inside the statement that reads who calls (PostgresRateLimiter). */
  charging?(bucket: Bucket): StatementCharge;
}

/** The rate limiter's columns in a row of a statement that charged a call (all NULL: nothing charged). */
export interface ChargedColumns {
  rl_count: number | string | null;
  rl_allowed: boolean | null;
  rl_previous: number | string | null;
}

/** A call to be charged within another statement (RateLimiter.charging). */
export interface StatementCharge {
  now: number;
  cap: number;
  reset: number;
  /** `source` (a SELECT of at most one row with a text column `identity`) wrapped so that it also charges that identity. */
  statement(source: string, params: unknown[]): { text: string; params: unknown[] };
  /** The limit's answer from the statement's row; undefined when it charged nobody. */
  settle(row: ChargedColumns, sql: SqlRunner): RateLimitResult | undefined;
}

export const WINDOW_MS = 60_000;

/**
 * Sliding window over two fixed windows (the previous window's count is
 * weighted by how much of it still overlaps), the same approximation Upstash
 * uses, so both backends behave alike. Memory stays bounded: one entry per
 * identity and bucket, dropped when two windows old.
 */
export class MemoryRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, { start: number; current: number; previous: number }>();
  private sweptAt = 0;

  constructor(
    private readonly caps: Record<Bucket, number>,
    private readonly now: () => number = Date.now,
  ) {}

  async limit(bucket: Bucket, identity: string): Promise<RateLimitResult> {
    const { key, entry, start, result } = this.window(bucket, identity);
    if (result.success) {
      entry.current += 1;
      result.remaining -= 1;
    }
    this.windows.set(key, entry);
    this.sweep(start);
    return result;
  }

  async peek(bucket: Bucket, identity: string): Promise<RateLimitResult> {
    return this.window(bucket, identity).result;
  }

  async refund(bucket: Bucket, identity: string, calls = 1, windowEnd?: number): Promise<void> {
    const { key, entry, start } = this.window(bucket, identity);
    const charged = windowEnd === undefined ? start : windowEnd - WINDOW_MS;
    // The calls were counted in this window, or in the previous one when the minute turned since.
    if (charged === start) entry.current -= Math.min(entry.current, calls);
    else if (charged === start - WINDOW_MS) entry.previous -= Math.min(entry.previous, calls);
    else return;
    this.windows.set(key, entry);
  }

  private window(bucket: Bucket, identity: string) {
    const now = this.now();
    const cap = this.caps[bucket];
    const start = Math.floor(now / WINDOW_MS) * WINDOW_MS;
    const key = `${bucket}:${identity}`;
    let entry = this.windows.get(key);
    if (!entry || entry.start < start - WINDOW_MS) entry = { start, current: 0, previous: 0 };
    else if (entry.start < start) entry = { start, current: 0, previous: entry.current };
    const overlap = 1 - (now - start) / WINDOW_MS;
    const used = Math.floor(entry.previous * overlap) + entry.current;
    const reset = start + WINDOW_MS;
    const result: RateLimitResult = { success: used < cap, limit: cap, remaining: Math.max(0, cap - used), reset, retryAfterMs: reset - now };
    return { key, entry, start, result };
  }

  private sweep(start: number): void {
    if (start === this.sweptAt) return;
    this.sweptAt = start;
    for (const [key, entry] of this.windows) if (entry.start < start - WINDOW_MS) this.windows.delete(key);
  }
}

/**
 * Shared limits across instances through Upstash Redis (REST). When Redis
 * cannot be reached the request is let through (and logged): an outage of
 * the limiter must not take the whole API down.
 */
export class UpstashRateLimiter implements RateLimiter {
  private readonly limiters: Record<Bucket, Ratelimit>;
  private lastFailureLog = 0;

  constructor(
    private readonly caps: Record<Bucket, number>,
    redis: Redis,
  ) {
    const make = (bucket: Bucket) =>
      new Ratelimit({
        redis,
        limiter: Ratelimit.slidingWindow(caps[bucket], "60 s"),
        prefix: `engram:rl:${bucket}`,
        analytics: false,
        // A slow Redis must not hold requests hostage: past this the request passes.
        timeout: 1000,
      });
    this.limiters = { regular: make("regular"), heavy: make("heavy"), light: make("light") };
  }

  async limit(bucket: Bucket, identity: string): Promise<RateLimitResult> {
    try {
      const { success, limit, remaining, reset } = await this.limiters[bucket].limit(identity);
      return { success, limit, remaining, reset, retryAfterMs: Math.max(0, reset - Date.now()) };
    } catch (error) {
      if (Date.now() - this.lastFailureLog > 60_000) {
        this.lastFailureLog = Date.now();
        console.error("rate limiter: Upstash Redis is unavailable, letting requests through", error);
      }
      const cap = this.caps[bucket];
      return { success: true, limit: cap, remaining: cap, reset: Date.now() + WINDOW_MS, retryAfterMs: 0 };
    }
  }

  async peek(bucket: Bucket, identity: string): Promise<RateLimitResult> {
    try {
      const { remaining, limit, reset } = await this.limiters[bucket].getRemaining(identity);
      return { success: remaining > 0, limit, remaining, reset, retryAfterMs: Math.max(0, reset - Date.now()) };
    } catch {
      // As limit() does when Redis is away: let it through (limit() logs the outage).
      const cap = this.caps[bucket];
      return { success: true, limit: cap, remaining: cap, reset: Date.now() + WINDOW_MS, retryAfterMs: 0 };
    }
  }

  async refund(bucket: Bucket, identity: string, calls = 1, windowEnd?: number): Promise<void> {
    // A negative rate is Upstash's refund: it is never refused, and counts calls less, in the current
    // window only. Once the minute turned, the calls are left counted: taken from the new window, they
    // gave this minute tokens the last one had paid (a previous window weighs only in part).
    if (windowEnd !== undefined && Date.now() >= windowEnd) return;
    await this.limiters[bucket].limit(identity, { rate: -calls }).catch(() => undefined);
  }
}

const globalForLimiter = globalThis as unknown as { __engramLimiter?: RateLimiter };

export function rateLimiter(): RateLimiter {
  if (!globalForLimiter.__engramLimiter) {
    const { rateLimits, upstash } = config();
    globalForLimiter.__engramLimiter = upstash
      ? new UpstashRateLimiter(rateLimits, upstashRedis(upstash))
      : rateLimitStore() === "postgres"
        ? new PostgresRateLimiter(rateLimits, async () => (await getDatabase()).sql)
        : new MemoryRateLimiter(rateLimits);
  }
  return globalForLimiter.__engramLimiter;
}

/** Longest wait for one Upstash REST call. */
const UPSTASH_REQUEST_TIMEOUT_MS = 2_000;

/**
 * The Upstash client of the rate limiter and the sign-in throttle. Every call carries a deadline: a
 * Redis that accepts the connection and never answers otherwise held a password sign-in (whose
 * throttle fails closed) for as long as the socket stayed open, and left every rate-limited request's
 * call hanging behind the limiter's own timeout. A timed-out call throws, and is not retried.
 */
export function upstashRedis(upstash: { url: string; token: string }): Redis {
  return new Redis({
    url: upstash.url,
    token: upstash.token,
    retry: { retries: 1, backoff: () => 50 },
    signal: () => AbortSignal.timeout(UPSTASH_REQUEST_TIMEOUT_MS),
  });
}

/**
 * Without Upstash: PostgreSQL (DATABASE_URL) keeps the counters in the database, so several server
 * processes share each user's budget; the embedded database (one process only) keeps them in memory.
 * ENGRAM_RATE_LIMIT_STORE=memory|postgres overrides (memory: one process, no database write per request).
 */
export function rateLimitStore(): "memory" | "postgres" {
  const store = process.env.ENGRAM_RATE_LIMIT_STORE;
  if (store === "memory" || store === "postgres") return store;
  if (store) throw new Error(`ENGRAM_RATE_LIMIT_STORE must be "memory" or "postgres", got "${store}"`);
  return process.env.DATABASE_URL ? "postgres" : "memory";
}

/** Tests swap the limiter (or reset it after changing the environment). */
export function setRateLimiter(limiter: RateLimiter | undefined): void {
  globalForLimiter.__engramLimiter = limiter;
}

export function rateLimitHeaders(result: RateLimitResult): Record<string, string> {
  return {
    "X-RateLimit-Limit": String(result.limit),
    "X-RateLimit-Remaining": String(result.remaining),
    "X-RateLimit-Reset": String(Math.ceil(result.reset / 1000)),
  };
}
