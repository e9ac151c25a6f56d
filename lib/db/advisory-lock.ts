import type { DbClient } from "./database.ts";

/**
 * A key to lock exclusively, or `{ shared: key }` for its shared side: any number of shared holders
 * at once, all excluded by one exclusive holder of the same key. A waiting exclusive request queues
 * ahead of later shared ones, so a stream of shared holders cannot starve it (a row's FOR SHARE lock
 * gives no such guarantee).
 */
export type LockKey = string | { shared: string };

/**
 * Serialises transactions that race on the same logical key (e.g. two pushes
 * of the same content into one hub). Held until the transaction ends.
 *
 * Several keys are taken in one statement, in the order given: every caller
 * keeps one fixed order (the same as when they were taken one by one), so two
 * transactions never wait on each other in a cycle. One statement instead of
 * one per key because on the embedded database each statement costs about a
 * millisecond. A read that must see what the previous holders committed needs a
 * statement of its own after this one: a statement's snapshot is taken before
 * its locks are granted.
 */
export async function lockForTransaction(tx: DbClient, keys: LockKey | LockKey[]): Promise<void> {
  const list = Array.isArray(keys) ? keys : [keys];
  if (list.length === 0) return;
  if (list.length === 1) {
    const key = list[0]!;
    if (typeof key === "string") await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`;
    else await tx.$executeRaw`SELECT pg_advisory_xact_lock_shared(hashtextextended(${key.shared}, 0))`;
    return;
  }
  const names = list.map((key) => (typeof key === "string" ? key : key.shared));
  const shared = list.map((key) => typeof key !== "string");
  // OFFSET 0 keeps the keys in the given order while the locks are taken.
  await tx.$queryRaw`
    SELECT count(CASE WHEN k.shared THEN (SELECT 1 FROM pg_advisory_xact_lock_shared(hashtextextended(k.key, 0)))
                      ELSE (SELECT 1 FROM pg_advisory_xact_lock(hashtextextended(k.key, 0))) END)::int AS n
    FROM (SELECT u.key, u.shared FROM unnest(${names}::text[], ${shared}::boolean[]) WITH ORDINALITY AS u(key, shared, i) ORDER BY u.i OFFSET 0) AS k`;
}
