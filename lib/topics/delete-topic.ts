import type { AuthContext } from "@/lib/api/context.ts";
import { runAsBackground } from "@/lib/db/background-work.ts";
import type { Database, Db } from "@/lib/db/database.ts";
import { purgeBatchSize } from "@/lib/hubs/purge-deleted-hubs.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";
import { HubTopics } from "./hub-topics.ts";
import { topicOrThrow } from "./topic-or-throw.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { lockMemoriesOf } from "@/lib/db/row-lock.ts";
import { databaseNow } from "@/lib/db/database-now.ts";
import { newId } from "@/lib/ids.ts";

/**
 * Deletes a topic and its whole branch (like archive, a branch goes as one).
 * Memories are never deleted with a topic: those filed under the branch stay
 * in the hub, without a topic. They leave it a bounded batch per transaction
 * (ENGRAM_PURGE_BATCH): all in the delete's one transaction, a topic of tens of
 * thousands of memories outlasted the transaction timeout and was rolled back
 * on every attempt, so it could never be deleted. The topics go with the last
 * batch, whose few memories the foreign key's cascade takes out.
 *
 * The first batch marks the branch as being deleted (deletingAt) in its transaction: read again by
 * each batch, a subtopic moved out between two batches lost part of its memories' filing and was
 * kept. Marked, the branch's topics are hidden and refused to every move, change and filing, so the
 * branch each batch reads is the one the delete began with; a delete cut short is finished by
 * sending it again, or by the sweep (finishTopicDeletes). The first batch, the last and at most one
 * in between per TOPIC_DELETE_EVENT_EVERY_MS are announced: one cut short has told the streams what
 * it unfiled, give or take a few seconds of batches.
 */
export async function deleteTopic(ctx: AuthContext, id: string) {
  const { topic } = await topicOrThrow(ctx, id, "delete topics", { withDeleting: true });
  const deleted = await deleteBranch(ctx.db, topic, { manager: { ctx, action: "delete topics" }, actorId: ctx.user.id, claim: newId(), takeOver: true });
  return { id: topic.id, topic_id: topic.id, deleted: true as const, deleted_count: deleted };
}

/**
 * The highest topic being deleted above a topic being deleted (a branch is marked whole, ≤ 5 levels), or
 * the topic itself when it is not being deleted; read under the hub's topic lock, where the marks are
 * the ones the batches go by.
 */
function topOfDeletingBranch(topics: HubTopics, id: string): string {
  for (let top = id; ; ) {
    const row = topics.byId.get(top);
    const parent = row?.parentId ? topics.byId.get(row.parentId) : undefined;
    if (!row?.deletingAt || !parent?.deletingAt) return top;
    top = parent.id;
  }
}

/**
 * Between a delete's first batch and its last, at most one batch per this long is announced: one event
 * per batch (100 for a topic of 50,000 memories) made every client of the hub refetch the tree as often.
 */
export const TOPIC_DELETE_EVENT_EVERY_MS = 5_000;

/**
 * The batches of one branch's delete; returns the topics deleted (0 when another delete took them).
 *
 * One delete at a time owns the branch: the one whose `claim` its top carries (topics.deleting_claim),
 * checked by every batch under the hub's topic lock. A delete sent again and the sweep each ran their
 * batches on the same branch, alternating, each announcing its own. A request (`takeOver`) claims the
 * branch with its first batch, whoever held it: sent again, it is what the client waits for, and a
 * request cut short has nothing left to stop. The sweep claims a branch only once left alone for
 * SWEEP_GRACE_MS (finishTopicDeletes). The one that lost it stops at its next batch, writing nothing.
 */
async function deleteBranch(
  db: Db,
  topic: { id: string; hubId: string },
  options: { manager: Parameters<typeof HubTopics.lockAndLoad>[2]; actorId: string | null; claim: string; takeOver: boolean },
): Promise<number> {
  const batch = purgeBatchSize();
  // The first batch is always announced: it hides the branch.
  let announcedAt = -Infinity;
  let takeOver = options.takeOver;
  let top = topic.id;
  for (;;) {
    const announce = Date.now() - announcedAt >= TOPIC_DELETE_EVENT_EVERY_MS;
    const deleted = await db.$transaction(async (tx) => {
      // Each batch under the hub's topic lock, with the caller's right to manage topics checked again.
      const topics = await HubTopics.lockAndLoad(tx, topic.hubId, options.manager, { withDeleting: true });
      // A request's topic inside a branch being deleted goes with it: its delete finishes the whole branch,
      // rather than claiming part of it from the one running its batches (which would then stop, half done).
      // Found here, under the lock: read before it, a parent's delete whose first batch committed in
      // between was not seen, and the two alternated batches of the subtopic's part.
      if (takeOver) top = topOfDeletingBranch(topics, top);
      const branch = topics.subtree(top).map((row) => row.id);
      if (branch.length) {
        // Claimed by another delete since this one's last batch: it finishes the branch and announces it.
        if (!takeOver && topics.byId.get(top)!.deletingClaim !== options.claim) return 0;
        // Every batch stamps the branch again, by the database's clock (the sweep compares it with its own):
        // a delete still running is never older than the sweep's grace, so the sweep leaves it alone.
        await tx.$executeRaw`
          UPDATE topics SET deleting_at = now(), deleting_claim = ${options.claim}::uuid WHERE hub_id = ${topic.hubId}::uuid AND id = ANY(${branch}::uuid[])`;
        // In id order, as every writer of several memories locks them (lib/db/row-lock.ts).
        const filed = await tx.$queryRaw<{ id: string }[]>`
          SELECT id::text AS id FROM memories WHERE hub_id = ${topic.hubId}::uuid AND topic_id = ANY(${branch}::uuid[])
           ORDER BY id LIMIT ${batch + 1} FOR NO KEY UPDATE`;
        if (filed.length > batch) {
          await tx.memory.updateMany({ where: { id: { in: filed.slice(0, batch).map((row) => row.id) }, hubId: topic.hubId }, data: { topicId: null } });
          if (announce) await emitEvent(tx, { type: "topic.changed", hubId: topic.hubId, actorId: options.actorId, entityId: top });
          return null;
        }
      }
      // Their memories go to the inbox by the foreign key's cascade: locked first, in id order.
      await lockMemoriesOf(tx, topic.hubId, branch);
      // deleteMany: a concurrent delete of the same topic is not an error, the outcome is the same; but
      // having deleted nothing, this one announces nothing (every stream of the hub refetched the tree).
      const { count } = await tx.topic.deleteMany({ where: { id: { in: branch }, hubId: topic.hubId } });
      if (count > 0) await emitEvent(tx, { type: "topic.changed", hubId: topic.hubId, actorId: options.actorId, entityId: top });
      return count;
    });
    if (deleted !== null) return deleted;
    // Once committed: a batch rolled back announced nothing, and claimed nothing.
    if (announce) announcedAt = Date.now();
    takeOver = false;
  }
}

const SWEEP_EVERY_MS = 10 * 60_000;
/**
 * How long a marked branch must have gone without a batch (or a sweep's attempt) before the sweep takes
 * it: far past the transaction timeout one batch is bounded by, so a delete still running is never taken.
 */
export const SWEEP_GRACE_MS = 10 * 60_000;
/** Branches one sweep finishes; the rest wait for the next. */
const BRANCHES_PER_SWEEP = 20;

/**
 * The sweep: finishes topic deletes cut short after their first batch (the request's time ran out, the
 * process stopped). Their branch is hidden and refused to everyone, so no client would send the delete
 * again, and the memories still filed under it were in no topic anyone sees nor in the inbox. Takes the
 * top of each marked branch whose last batch is older than SWEEP_GRACE_MS, longest untouched first;
 * returns the branches finished. One that fails is logged and the sweep goes on with the others.
 *
 * Without the grace, the sweep (every instance runs one at start) took over deletes still running in
 * their request: the two alternated batches, announced each twice, and the request could answer
 * deleted_count 0 for a delete it had almost all done. Each branch is claimed by stamping it before its
 * first batch, so two sweeps never take the same one, and one that fails goes behind the others: a
 * batch of branches that always fail does not hold back newer ones.
 */
export async function finishTopicDeletes(db: Db, limit = BRANCHES_PER_SWEEP): Promise<number> {
  const now = await databaseNow(db);
  const stale = new Date(now.getTime() - SWEEP_GRACE_MS);
  const tops = await db.topic.findMany({
    where: { deletingAt: { lt: stale }, OR: [{ parentId: null }, { parent: { deletingAt: null } }] },
    orderBy: [{ deletingAt: "asc" }, { id: "asc" }],
    take: limit,
    select: { id: true, hubId: true },
  });
  let finished = 0;
  for (const top of tops) {
    try {
      const claim = newId();
      const { count } = await db.topic.updateMany({ where: { id: top.id, deletingAt: { lt: stale } }, data: { deletingAt: await databaseNow(db), deletingClaim: claim } });
      // Another sweep or a delete sent again took it since the read above.
      if (count === 0) continue;
      // 0: a delete sent again took it over meanwhile, and finishes it.
      if ((await deleteBranch(db, top, { manager: null, actorId: null, claim, takeOver: false })) > 0) finished++;
    } catch (error) {
      console.error(`[engram] topics: finishing the delete of topic ${top.id} failed; the next sweep tries again`, error);
    }
  }
  return finished;
}

/** Runs the sweep every 10 minutes (and at start) for the life of the process, as background work. */
export function startTopicDeletesSweep(database: Database): void {
  runPeriodically("topics: deletes cut short", SWEEP_EVERY_MS, () => runAsBackground(() => finishTopicDeletes(database.prisma)));
}
