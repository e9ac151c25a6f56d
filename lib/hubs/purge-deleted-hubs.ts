import { kickCustomBoard } from "@/lib/boards/kick-custom-board.ts";
import { positiveIntEnv } from "@/lib/config.ts";
import { runAsBackground } from "@/lib/db/background-work.ts";
import type { Database, Db, DbClient } from "@/lib/db/database.ts";
import { dropMemoryCopies } from "@/lib/memories/drop-memory-copies.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";
import { detachUploads, removeBlobs } from "@/lib/uploads/sweep-uploads.ts";

/**
 * ENGRAM_PURGE_BATCH (default 500): memories one transaction of a hub delete or an account-data delete
 * removes, and that a topic delete takes out of the topic (lib/topics/delete-topic.ts). A hub of 100,000s of memories deleted in one transaction outlasted the transaction timeout
 * (20 s) and was rolled back on every attempt, so it could never be deleted.
 */
export function purgeBatchSize(): number {
  return positiveIntEnv("ENGRAM_PURGE_BATCH", 500);
}

const PURGE_EVERY_MS = 10 * 60_000;
/**
 * Times purgeDeletedHub goes round when a memory landed after its last batch: a memory written every
 * round (the sweep passes no deadline) kept it, the sweep and every hub after it going for good. Left
 * for the next sweep after that.
 */
const PURGE_ROUNDS = 5;
/** Deleted hubs one sweep takes up. */
const HUBS_PER_SWEEP = 20;
/**
 * Batches the sweep deletes of one hub (100,000 memories at the default batch). It passes no deadline,
 * and a hub that found memories in every batch (written in as fast as they went) held the sweep, and
 * every deleted hub after it, for good; a larger hub is finished over several sweeps.
 */
export const PURGE_BATCHES_PER_HUB = 200;

/**
 * Deletes the hub's memories (with their chunks, attachments and files) a batch per transaction, until
 * none is left, `deadline` (epoch ms) passed or `maxBatches` batches went; returns how many went and
 * whether the hub is empty.
 * Each batch locks its rows in id order before deleting, as every multi-memory write does (row-lock.ts),
 * and drops what other rows keep of them as a memory delete does (drop-memory-copies.ts): a memory moved
 * in from another hub, or out of it, is still named in that hub's reviews and boards, which the hub's own
 * cascade never reaches. `wanted`, run first in each batch's transaction, stops the purge (not done) when
 * it answers false; `beforeBatch` runs before each batch's transaction.
 */
export async function deleteHubMemories(
  db: Db,
  hubId: string,
  options: { deadline?: number; batch?: number; maxBatches?: number; wanted?: (tx: DbClient) => Promise<boolean>; beforeBatch?: () => Promise<unknown> } = {},
): Promise<{ deleted: number; done: boolean; batches: number }> {
  const batch = options.batch ?? purgeBatchSize();
  let deleted = 0;
  for (let batches = 0; ; batches++) {
    if (options.deadline !== undefined && Date.now() >= options.deadline) return { deleted, done: false, batches };
    if (options.maxBatches !== undefined && batches >= options.maxBatches) return { deleted, done: false, batches };
    await options.beforeBatch?.();
    const { count, keys, boards, stopped } = await db.$transaction(async (tx) => {
      if (options.wanted && !(await options.wanted(tx))) return { count: 0, keys: [], boards: [], stopped: true };
      // Not SKIP LOCKED: a memory an edit holds is waited for, not left behind for the next sweep.
      const rows = await tx.$queryRaw<{ id: string }[]>`
        SELECT id::text AS id FROM memories WHERE hub_id = ${hubId}::uuid ORDER BY id LIMIT ${batch} FOR UPDATE`;
      if (rows.length === 0) return { count: 0, keys: [], boards: [], stopped: false };
      const ids = rows.map((row) => row.id);
      const keys = await detachUploads(tx, { memoryId: { in: ids } });
      const count = (await tx.memory.deleteMany({ where: { id: { in: ids } } })).count;
      const emptied = await dropMemoryCopies(tx, ids, new Date());
      // The hub's own boards go with it: asking them again over a hub being emptied is for nothing.
      const boards = emptied.length ? (await tx.customBoard.findMany({ where: { id: { in: emptied }, hubId: { not: hubId } }, select: { id: true } })).map((b) => b.id) : [];
      return { count, keys, boards, stopped: false };
    });
    // The files go after each commit (the upload sweep retries any that fail), and emptied boards cook again.
    await removeBlobs(db, keys);
    for (const board of boards) kickCustomBoard(board);
    if (stopped) return { deleted, done: false, batches };
    deleted += count;
    if (count === 0) return { deleted, done: true, batches };
  }
}

/**
 * Finishes the delete of one hub marked deleted (lib/hubs/delete-hub.ts): its memories in batches, then
 * the hub row, whose cascade takes what is left (topics, dream runs, boards: bounded per hub). Returns
 * whether the hub is gone; false when the deadline or PURGE_BATCHES_PER_HUB came first, memories are still
 * being purged by another, or new ones kept landing (PURGE_ROUNDS).
 */
export async function purgeDeletedHub(db: Db, hubId: string, deadline?: number): Promise<boolean> {
  let batchesLeft = PURGE_BATCHES_PER_HUB;
  for (let round = 1; round <= PURGE_ROUNDS; round++) {
    const { done, batches } = await deleteHubMemories(db, hubId, { deadline, maxBatches: batchesLeft });
    if (!done) return false;
    batchesLeft -= batches;
    // Only once no memory is left, so this statement's cascade stays small whatever the hub held.
    const removed = await db.$executeRaw`
      DELETE FROM hubs WHERE id = ${hubId}::uuid AND deleted_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memories WHERE hub_id = ${hubId}::uuid)`;
    if (removed > 0) return true;
    // A memory written after the last batch read (a dream's, a move's under way) sends it round again.
    if ((await db.memory.count({ where: { hubId } })) === 0) return (await db.hub.count({ where: { id: hubId, deletedAt: { not: null } } })) === 0;
  }
  return false;
}

/**
 * The sweep: finishes hubs whose delete was cut short (the request's time ran out, or the process
 * stopped). Returns hubs finished. A hub that fails (a deadlock, a row the database refuses) is logged
 * and marked, and the sweep goes on: thrown, it stopped every sweep at the same hub, and every hub
 * deleted after it kept its memories. Marked hubs come after the rest, longest-failed first, so a few
 * that keep failing cannot take a sweep's places from the others.
 */
export async function purgeDeletedHubs(db: Db, limit = HUBS_PER_SWEEP): Promise<number> {
  const hubs = await db.hub.findMany({
    where: { deletedAt: { not: null } },
    orderBy: [{ purgeFailedAt: { sort: "asc", nulls: "first" } }, { deletedAt: "asc" }, { id: "asc" }],
    take: limit,
    select: { id: true },
  });
  let finished = 0;
  for (const hub of hubs) {
    try {
      if (await purgeDeletedHub(db, hub.id)) finished++;
    } catch (error) {
      console.error(`[engram] hubs: purging deleted hub ${hub.id} failed; the next sweeps try the other deleted hubs first`, error);
      await db.hub.updateMany({ where: { id: hub.id }, data: { purgeFailedAt: new Date() } }).catch((markError: unknown) => console.error(`[engram] hubs: marking deleted hub ${hub.id} as failed failed`, markError));
    }
  }
  return finished;
}

/** Runs the sweep every 10 minutes (and at start) for the life of the process, as background work. */
export function startDeletedHubsPurge(database: Database): void {
  runPeriodically("hubs: deleted hubs purge", PURGE_EVERY_MS, () => runAsBackground(() => purgeDeletedHubs(database.prisma)));
}
