import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { detachUploads, removeBlobs } from "@/lib/uploads/sweep-uploads.ts";
import { assertTeamHub, hubPermissionOrThrow, lockHubMembers } from "./hub-access.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { lockMemoriesOf } from "@/lib/db/row-lock.ts";

/**
 * Owner only. Removes the hub with its memories, chunks, topics, invites,
 * attachments, transfers and memberships in one statement, so one transaction
 * (every child table cascades from hubs); the owner check is repeated in the delete itself so a concurrent
 * ownership transfer cannot let the previous owner through.
 */
export async function deleteHub(ctx: AuthContext, hubId: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.own", "delete the hub");
  assertTeamHub(hub, "deleted");
  const keys = await ctx.db.$transaction(async (tx) => {
    // Pushes into the hub that are under way finish first; later ones find no membership.
    await lockHubMembers(tx, hub.id);
    // Its members are gone with it, so they are named as the event's audience.
    const members = await tx.hubMember.findMany({ where: { hubId: hub.id }, select: { userId: true } });
    // Its memories go by the cascade: locked first, in id order.
    await lockMemoriesOf(tx, hub.id);
    const detached = await detachUploads(tx, { hubId: hub.id });
    const { count } = await tx.hub.deleteMany({ where: { id: hub.id, ownerId: ctx.user.id, hubType: "team" } });
    if (count === 0) throw new ApiError("forbidden", "Only the hub owner can delete the hub");
    // Notifications name hubs without a foreign key (an invitee is not a member yet): they go by hand.
    await tx.notification.deleteMany({ where: { hubId: hub.id } });
    await emitEvent(tx, { type: "hub.deleted", hubId: hub.id, actorId: ctx.user.id, entityId: hub.id, userIds: members.map((m) => m.userId) });
    return detached;
  });
  // The files of its memories go after the commit (the upload sweep retries any that fail).
  await removeBlobs(ctx.db, keys);
  return { id: hub.id, hub_id: hub.id, deleted: true as const };
}
