import type { Db, DbClient } from "@/lib/db/database.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { onAccessEnded } from "@/lib/notifications/notify.ts";
import { lockUsageCounters } from "@/lib/quotas/lock-usage-counters.ts";
import { lockHubMembers } from "./hub-access.ts";

const NOT_REMOVED = Symbol("not removed");

/**
 * Ends a non-owner's membership and cancels a pending ownership transfer aimed
 * at them, atomically. The owner row is never matched, so a concurrent transfer
 * that just made this user the owner wins. Returns whether a row was removed.
 *
 * The transfer row is written before the membership row: accepting a transfer locks them in that
 * order too, so a leave racing an accept waits for it instead of deadlocking with it (issue 16).
 */
export async function dropMembership(
  db: Db,
  hubId: string,
  userId: string,
  now: Date,
  actorId: string | null = userId,
  /** The role the caller's permission check saw: a row whose role changed since is left alone. */
  expectedRole?: string,
  /** Runs under the lock before anything changes: the remover's own permission, read again (it may throw). */
  recheck?: (tx: DbClient) => Promise<void>,
): Promise<boolean> {
  return db
    .$transaction(async (tx) => {
      await lockHubMembers(tx, hubId);
      await recheck?.(tx);
      const canceled = await tx.ownershipTransfer.updateManyAndReturn({
        where: { hubId, targetUserId: userId, state: "pending" },
        data: { state: "canceled", resolvedAt: now },
        select: { id: true },
      });
      const { count } = await tx.hubMember.deleteMany({ where: { hubId, userId, role: expectedRole && expectedRole !== "owner" ? expectedRole : { not: "owner" } } });
      // Nothing removed: undo the cancel too.
      if (count === 0) throw NOT_REMOVED;
      await handOverMemories(tx, hubId, userId);
      // Their offer of ownership (now canceled) and every other pending row about the hub expire.
      await onAccessEnded(tx, hubId, userId, now);
      await emitEvent(tx, [
        ...canceled.map((transfer) => ({ type: "transfer.canceled" as const, hubId, actorId, entityId: transfer.id })),
        { type: "member.removed", hubId, actorId, entityId: userId },
      ]);
      return true;
    })
    .catch((error: unknown) => {
      if (error === NOT_REMOVED) return false;
      throw error;
    });
}

/**
 * What the member wrote in the hub stays there and becomes the hub owner's. Kept in their name, it filled
 * their storage quota (and /v1/usage) for good with memories they could no longer read, edit or delete,
 * and a member removed by an admin could not free that room at all. The owner, who may delete any of it,
 * pays from now on (the hub's own quota already counts it); a transfer moves no memory, each member paying
 * for what they own while they are in the hub. Under the members lock (held exclusively here) no push
 * of theirs into the hub is still under way; the memory rows are locked in id order before their
 * counters, as a batch move and a hub delete take them, so neither deadlocks with this.
 */
async function handOverMemories(tx: DbClient, hubId: string, userId: string): Promise<void> {
  const hub = await tx.hub.findUniqueOrThrow({ where: { id: hubId }, select: { ownerId: true } });
  const rows = await tx.$queryRaw<{ id: string; topicId: string | null }[]>`
    SELECT id::text AS id, topic_id::text AS "topicId" FROM memories WHERE hub_id = ${hubId}::uuid AND owner_id = ${userId}::uuid ORDER BY id FOR UPDATE`;
  if (rows.length === 0) return;
  const topics = [...new Set(rows.flatMap((row) => (row.topicId ? [row.topicId] : [])))];
  await lockUsageCounters(tx, [
    { scope: "hub", id: hubId },
    { scope: "inbox", id: hubId },
    ...topics.map((id) => ({ scope: "topic" as const, id })),
    { scope: "user", id: userId },
    { scope: "user", id: hub.ownerId },
  ]);
  await tx.$executeRaw`UPDATE memories SET owner_id = ${hub.ownerId}::uuid WHERE id = ANY(${rows.map((row) => row.id)}::uuid[])`;
}
