import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { can, type Role } from "@/lib/api/permissions.ts";
import { isUuid } from "@/lib/ids.ts";
import { hubPermissionOrThrow, lockHubMembers, lockMembershipOrThrow } from "./hub-access.ts";
import { memberUserSelect, serializeMember } from "./serialize-hub.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { onReviewRightsLost } from "@/lib/notifications/notify.ts";
import { revokeOrphanedInvites } from "@/lib/invites/revoke-orphaned-invites.ts";

/**
 * Changes a member's role. The owner's role only changes through a transfer;
 * promoting to or demoting from admin is the owner's alone.
 */
export async function updateMember(ctx: AuthContext, hubId: string, memberId: string, input: { role: Exclude<Role, "owner"> }) {
  // As the database reads it (UUIDs match regardless of case), so the event names the member's id as stored.
  const userId = memberId.toLowerCase();
  const { hub, role } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "change member roles");
  const target = isUuid(userId) ? await ctx.db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId } } }) : null;
  if (!target) throw new ApiError("not_found", "Member not found");
  if (target.role === "owner") throw new ApiError("cannot_change_owner", "The owner's role changes only through an ownership transfer");
  const touchesAdmin = target.role === "admin" || input.role === "admin";
  const adminsOnlyByOwner = () => new ApiError("forbidden", "Only the hub owner can promote or demote admins");
  if (touchesAdmin && !can(role, "admins.manage")) throw adminsOnlyByOwner();
  // Conditional on the role we checked: a concurrent change (or transfer) makes this a conflict, not a silent overwrite.
  const { count } = await ctx.db.$transaction(async (tx) => {
    await lockHubMembers(tx, hub.id);
    // The caller's own role again, under the lock: an admin removed or demoted (or an owner who handed
    // the hub over) since the check above changes no one's role once that change has returned.
    const current = await lockMembershipOrThrow(tx, ctx, hub, "hub.manage", "change member roles", { locked: true });
    if (touchesAdmin && !can(current.role, "admins.manage")) throw adminsOnlyByOwner();
    // Links they made while they could invite, dead since, stay dead (they held no slot).
    await revokeOrphanedInvites(tx, hub.id, userId, ctx.now());
    const result = await tx.hubMember.updateMany({ where: { hubId: hub.id, userId, role: target.role }, data: { role: input.role } });
    if (result.count) await emitEvent(tx, { type: "member.updated", hubId: hub.id, actorId: ctx.user.id, entityId: userId });
    // Reviews are flagged for owners and admins; one demoted keeps only the rows their new role still decides
    // (the hub's setting read under the lock, which a settings change takes shared).
    if (result.count && target.role === "admin" && input.role !== "admin") {
      const policy = await tx.hub.findUniqueOrThrow({ where: { id: hub.id }, select: { allowContributorTopics: true, allowContributorDreams: true, contributorDeletePolicy: true } });
      if (!can(input.role, "dreams.trigger", policy)) await onReviewRightsLost(tx, hub.id, userId, ctx.now());
    }
    return result;
  });
  if (count === 0) throw new ApiError("conflict", "The member changed while you were editing; reload and try again");
  const member = await ctx.db.hubMember.findUniqueOrThrow({
    where: { hubId_userId: { hubId: hub.id, userId } },
    include: { user: memberUserSelect },
  });
  // `status` is what the Memax SDK reads back.
  return { ...serializeMember(member, { id: ctx.user.id, role }), status: "updated" as const };
}
