import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { assertTeamHub, hubPermissionOrThrow, lockHubMembers } from "./hub-access.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { purgeDeletedHub } from "./purge-deleted-hubs.ts";

/** How long the request itself purges a deleted hub's memories before leaving the rest to the sweep. */
const INLINE_PURGE_MS = 5_000;

/**
 * Owner only. One short transaction marks the hub deleted and removes its memberships, invites,
 * transfers and notifications: from its commit nobody can read or write the hub (every access goes
 * through a membership) and its slug is free. Its memories, chunks, topics and files then go in bounded
 * batches (purgeDeletedHub), here for a few seconds and by the sweep for the rest: one transaction over
 * a hub of 100,000s of memories outlasted the transaction timeout and failed on every attempt. The
 * owner check is repeated in the mark itself so a concurrent ownership transfer cannot let the previous
 * owner through.
 */
export async function deleteHub(ctx: AuthContext, hubId: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.own", "delete the hub");
  assertTeamHub(hub, "deleted");
  await ctx.db.$transaction(async (tx) => {
    // Pushes into the hub that are under way finish first; later ones find no membership.
    await lockHubMembers(tx, hub.id);
    const { count } = await tx.hub.updateMany({
      where: { id: hub.id, ownerId: ctx.user.id, hubType: "team", deletedAt: null },
      // The slug is released with the hub. Its stand-in is one no hub can be given (":" fails SLUG_RE):
      // hub ids are no secret, so a stand-in a user could choose could be taken first, and this update
      // would then fail on the unique index on every attempt.
      data: { deletedAt: ctx.now(), slug: `deleted:${hub.id}` },
    });
    if (count === 0) {
      const current = await tx.hub.findUnique({ where: { id: hub.id }, select: { deletedAt: true } });
      if (!current || current.deletedAt) throw new ApiError("not_found", "Hub not found");
      throw new ApiError("forbidden", "Only the hub owner can delete the hub");
    }
    // Its members are gone with it, so they are named as the event's audience.
    const members = await tx.hubMember.findMany({ where: { hubId: hub.id }, select: { userId: true } });
    await tx.hubMember.deleteMany({ where: { hubId: hub.id } });
    await tx.invite.deleteMany({ where: { hubId: hub.id } });
    await tx.ownershipTransfer.deleteMany({ where: { hubId: hub.id } });
    // Notifications name hubs without a foreign key (an invitee is not a member yet): they go by hand.
    await tx.notification.deleteMany({ where: { hubId: hub.id } });
    await emitEvent(tx, { type: "hub.deleted", hubId: hub.id, actorId: ctx.user.id, entityId: hub.id, userIds: members.map((m) => m.userId) });
  });
  // The hub is deleted for everyone from here on: a failure while purging is the sweep's to finish, not the caller's error.
  await purgeDeletedHub(ctx.db, hub.id, Date.now() + INLINE_PURGE_MS).catch((error: unknown) =>
    console.error(`[engram] hubs: purging deleted hub ${hub.id} failed; the sweep will finish it`, error),
  );
  return { id: hub.id, hub_id: hub.id, deleted: true as const };
}
