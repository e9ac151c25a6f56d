import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { can } from "@/lib/api/permissions.ts";
import { isUuid } from "@/lib/ids.ts";
import { dropMembership } from "./drop-membership.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { assertActsForAccount, assertTeamHub, hubPermissionOrThrow, lockMembershipOrThrow, membershipOrThrow } from "./hub-access.ts";

/**
 * Removes a member. Admins remove contributors and viewers, the owner anyone
 * but themself; any non-owner may remove their own membership (same as leave).
 */
export async function removeMember(ctx: AuthContext, hubId: string, memberId: string) {
  // As the database reads it (UUIDs match regardless of case), so "yourself", the answer and the event agree with it.
  const userId = memberId.toLowerCase();
  const self = userId === ctx.user.id;
  const { hub, role } = self ? await membershipOrThrow(ctx, hubId) : await hubPermissionOrThrow(ctx, hubId, "hub.manage", "remove members");
  if (self) {
    // Removing oneself is leaving, and a personal hub cannot be left (as POST /leave answers).
    assertTeamHub(hub, "left");
    assertActsForAccount(ctx.credential, "leave a hub");
  }
  const target = isUuid(userId) ? await ctx.db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId } } }) : null;
  if (!target) throw new ApiError("not_found", "Member not found");
  if (target.role === "owner") {
    throw new ApiError("cannot_change_owner", "The owner cannot be removed; transfer ownership first, or delete the hub");
  }
  const adminsOnlyByOwner = () => new ApiError("forbidden", "Only the hub owner can remove admins");
  if (!self && target.role === "admin" && !can(role, "admins.manage")) throw adminsOnlyByOwner();
  // The remover's own role again, under the lock: an admin removed or demoted (or an owner who handed the
  // hub over) since the check above removes no one once that change has returned.
  const recheck = self
    ? undefined
    : async (tx: DbClient) => {
        const current = await lockMembershipOrThrow(tx, ctx, hub, "hub.manage", "remove members", { locked: true });
        if (target.role === "admin" && !can(current.role, "admins.manage")) throw adminsOnlyByOwner();
      };
  // Removed only with the role checked above: a contributor promoted to admin meanwhile is not removed
  // by an admin who may not remove admins.
  if (!(await dropMembership(ctx.db, hub.id, userId, ctx.now(), ctx.user.id, self ? undefined : target.role, recheck))) {
    const current = await ctx.db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId } }, select: { role: true } });
    if (current) throw new ApiError("conflict", "The member's role changed meanwhile; reload and try again");
    throw new ApiError("not_found", "Member not found");
  }
  return { user_id: userId, removed: true as const, status: "removed" as const };
}
