import type { Db } from "@/lib/db/database.ts";

interface Pending {
  db: Db;
  counts: Map<string, number>;
  at: Date;
}

const globalForAccess = globalThis as unknown as { __engramAccess?: { pending: Pending | null; flushing: Promise<void> } };
const queue = (globalForAccess.__engramAccess ??= { pending: null, flushing: Promise.resolve() });

/**
 * How long recorded accesses wait to be written: under load, one UPDATE then
 * covers many recalls instead of one each (the counts only order
 * sort=relevant, which tolerates a quarter-second lag).
 */
const FLUSH_DELAY_MS = 250;
/** A batch this large is written at once. */
const FLUSH_AT_IDS = 500;

/**
 * Counts memories returned by recall as accessed without making the request
 * wait: ids are batched and written in one UPDATE shortly after the response.
 */
export function recordAccess(db: Db, memoryIds: string[], at: Date): void {
  if (memoryIds.length === 0) return;
  if (queue.pending && queue.pending.db !== db) void flushAccess();
  if (!queue.pending) {
    queue.pending = { db, counts: new Map(), at };
    setTimeout(() => void flushAccess(), FLUSH_DELAY_MS);
  }
  for (const id of memoryIds) queue.pending.counts.set(id, (queue.pending.counts.get(id) ?? 0) + 1);
  queue.pending.at = at;
  if (queue.pending.counts.size >= FLUSH_AT_IDS) void flushAccess();
}

/** Writes the batched counts; resolves when every count recorded so far is stored. */
export function flushAccess(): Promise<void> {
  const batch = queue.pending;
  queue.pending = null;
  if (batch) {
    const ids = [...batch.counts.keys()];
    const increments = ids.map((id) => batch.counts.get(id)!);
    queue.flushing = queue.flushing.then(() =>
      batch.db
        .$transaction([
          // Locked in id order first, as every write of several memories does (lib/db/row-lock.ts): the
          // UPDATE alone locks them in the order it joins them, and a batch move holding some of the
          // same rows in id order deadlocked with it (tests/races.test.ts). The UPDATE's own lock strength,
          // so a chunk insert's foreign-key check (KEY SHARE) is not held up by it.
          batch.db.$executeRawUnsafe(`SELECT 1 FROM memories WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`, ids),
          batch.db.$executeRawUnsafe(
            `UPDATE memories AS m SET access_count = m.access_count + u.n, last_accessed_at = $3::timestamptz
             FROM unnest($1::uuid[], $2::int[]) AS u(id, n) WHERE m.id = u.id`,
            ids,
            increments,
            batch.at.toISOString(),
          ),
        ])
        .then(() => undefined)
        .catch((error) => console.error("[engram] recall: recording access counts failed", error)),
    );
  }
  return queue.flushing;
}
