import type { Db } from "@/lib/db/database.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { BASE_LOCK_MS, lockMs, MAX_LOCK_MS } from "./sign-in-lock.ts";
import type { ThrottleState, ThrottleStore } from "./sign-in-throttle.ts";

const PRUNE_EVERY_MS = 3600_000;
const PRUNE_AGAIN_MS = 60_000;

/**
 * Sign-in failure counts in PostgreSQL, so every server process on the database sees the same locks
 * (chosen like the request buckets: lib/api/rate-limit.ts rateLimitStore). A failure's count and the
 * lock it earns are written by one statement: a try reading between two writes saw the new count
 * with no lock (or an expired one) and was let through as if a lock had just run out. Expired rows
 * are pruned now and then.
 */
export class PostgresThrottleStore implements ThrottleStore {
  private pruneDueAt = 0;
  /** One prune at a time per process: failures during a slow one must not start more. */
  private pruning = false;

  /**
   * `prune`: rows one hourly prune deletes, `batch` a statement at most `batches` times (again a
   * minute later while a backlog is left). Every new
   * address or e-mail failing adds a row a day, and the expired went in one unbounded DELETE that
   * held its locks over a whole backlog (a spray over an IPv6 range's /64s leaves many).
   */
  constructor(
    private readonly db: () => Promise<Db>,
    private readonly prune: { batch: number; batches: number } = { batch: 1000, batches: 20 },
  ) {}

  async get(keys: string[]): Promise<(ThrottleState | undefined)[]> {
    const db = await this.db();
    const now = Date.now();
    const rows = await db.signInThrottle.findMany({ where: { key: { in: keys }, expiresMs: { gt: BigInt(now) } } });
    const byKey = new Map(rows.map((row) => [row.key, { failures: row.failures, until: Number(row.untilMs) }]));
    return keys.map((key) => byKey.get(key));
  }

  async fail(key: string, free: number, ttlMs: number, now: number): Promise<ThrottleState> {
    const db = await this.db();
    const counted = Prisma.sql`(CASE WHEN t.expires_ms > ${now}::bigint THEN t.failures + 1 ELSE 1 END)`;
    const firstLock = lockMs(1, free);
    const [row] = await db.$queryRaw<{ failures: number; until_ms: bigint }[]>`
      INSERT INTO sign_in_throttle AS t (key, failures, until_ms, expires_ms)
      VALUES (${key}, 1, ${firstLock ? now + firstLock : 0}::bigint, ${now + Math.max(ttlMs, firstLock)}::bigint)
      ON CONFLICT (key) DO UPDATE
      SET failures = ${counted},
        until_ms = CASE WHEN ${lockSql(counted, free)} > 0 THEN ${now}::bigint + ${lockSql(counted, free)} ELSE 0 END,
        expires_ms = ${now}::bigint + GREATEST(${ttlMs}::bigint, ${lockSql(counted, free)})
      RETURNING t.failures, t.until_ms`;
    if (now >= this.pruneDueAt && !this.pruning) {
      this.pruning = true;
      this.pruneDueAt = now + PRUNE_EVERY_MS;
      const expired = { expiresMs: { lte: BigInt(now) } };
      let full = false;
      deleteInBatches(
        async (take) => {
          const rows = await db.signInThrottle.findMany({ where: expired, select: { key: true }, take });
          full = rows.length === take;
          return rows.map((row) => ({ id: row.key }));
        },
        // The condition again: a key failing since the read lives on.
        (keys) => db.signInThrottle.deleteMany({ where: { ...expired, key: { in: keys } } }),
        this.prune.batch,
        this.prune.batches,
      )
        .then(() => {
          // Its last batch full, a backlog is left: an hour's wait let a spray of new keys outgrow
          // the prune for good, so the next failure past a minute prunes again.
          if (full) this.pruneDueAt = now + PRUNE_AGAIN_MS;
        })
        .catch((error: unknown) => console.error("sign-in throttle: could not prune", error))
        .finally(() => {
          this.pruning = false;
        });
    }
    return { failures: Number(row!.failures), until: Number(row!.until_ms) };
  }

  async clear(key: string): Promise<void> {
    await (await this.db()).signInThrottle.deleteMany({ where: { key } });
  }

  async forgive(key: string, free: number, now: number, letThrough = false): Promise<void> {
    const db = await this.db();
    // One statement, so a failure counted meanwhile keeps the lock it wrote.
    const lowered = Prisma.sql`(t.failures - 1)`;
    await db.$executeRaw`
      UPDATE sign_in_throttle AS t SET failures = ${lowered},
        until_ms = CASE WHEN NOT ${letThrough}::boolean AND ${lockSql(lowered, free)} > 0 THEN LEAST(t.until_ms, ${now}::bigint + ${lockSql(lowered, free)}) ELSE 0 END
      WHERE t.key = ${key} AND t.failures > 0 AND t.expires_ms > ${now}::bigint`;
  }
}

/** lockMs in SQL, for the count `failures` computes. */
function lockSql(failures: Prisma.Sql, free: number): Prisma.Sql {
  return Prisma.sql`(CASE WHEN ${failures} < ${free}::int THEN 0::bigint ELSE LEAST(${MAX_LOCK_MS}::bigint, ${BASE_LOCK_MS}::bigint << LEAST(${failures} - ${free}::int, 20)) END)`;
}
