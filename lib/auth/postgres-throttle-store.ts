import type { Db } from "@/lib/db/database.ts";
import type { ThrottleState, ThrottleStore } from "./sign-in-throttle.ts";

/**
 * Sign-in failure counts in PostgreSQL, so every server process on the database sees the same locks
 * (chosen like the request buckets: lib/api/rate-limit.ts rateLimitStore). The count is taken by one
 * atomic upsert; the lock it earns is written next. Expired rows are pruned now and then.
 */
export class PostgresThrottleStore implements ThrottleStore {
  private prunedAt = 0;

  constructor(private readonly db: () => Promise<Db>) {}

  async get(keys: string[]): Promise<(ThrottleState | undefined)[]> {
    const db = await this.db();
    const now = Date.now();
    const rows = await db.signInThrottle.findMany({ where: { key: { in: keys }, expiresMs: { gt: BigInt(now) } } });
    const byKey = new Map(rows.map((row) => [row.key, { failures: row.failures, until: Number(row.untilMs) }]));
    return keys.map((key) => byKey.get(key));
  }

  async fail(key: string, lockFor: (failures: number) => number, ttlMs: number, now: number): Promise<ThrottleState> {
    const db = await this.db();
    const [row] = await db.$queryRaw<{ failures: number }[]>`
      INSERT INTO sign_in_throttle AS t (key, failures, until_ms, expires_ms) VALUES (${key}, 1, 0, ${now + ttlMs}::bigint)
      ON CONFLICT (key) DO UPDATE
      SET failures = CASE WHEN t.expires_ms > ${now}::bigint THEN t.failures + 1 ELSE 1 END, expires_ms = ${now + ttlMs}::bigint
      RETURNING t.failures`;
    const failures = Number(row!.failures);
    const lock = lockFor(failures);
    const until = lock ? now + lock : 0;
    await db.signInThrottle.updateMany({ where: { key, failures }, data: { untilMs: BigInt(until), expiresMs: BigInt(now + Math.max(ttlMs, lock)) } });
    if (now - this.prunedAt > 3600_000) {
      this.prunedAt = now;
      db.signInThrottle.deleteMany({ where: { expiresMs: { lte: BigInt(now) } } }).catch((error: unknown) => console.error("sign-in throttle: could not prune", error));
    }
    return { failures, until };
  }

  async clear(key: string): Promise<void> {
    await (await this.db()).signInThrottle.deleteMany({ where: { key } });
  }

  async forgive(key: string, lockFor: (failures: number) => number, now: number): Promise<void> {
    const db = await this.db();
    const [row] = await db.$queryRaw<{ failures: number }[]>`
      UPDATE sign_in_throttle SET failures = failures - 1 WHERE key = ${key} AND failures > 0 AND expires_ms > ${now}::bigint RETURNING failures`;
    if (!row) return;
    const failures = Number(row.failures);
    // Only while no failure counted since changed the count (its own write sets the lock it earns).
    if (!lockFor(failures)) await db.signInThrottle.updateMany({ where: { key, failures }, data: { untilMs: BigInt(0) } });
  }
}
