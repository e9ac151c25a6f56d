import type { Db, DbClient } from "@/lib/db/database.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { onAccessEnded } from "@/lib/notifications/notify.ts";
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
