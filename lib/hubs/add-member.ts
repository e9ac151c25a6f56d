import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { can } from "@/lib/api/permissions.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { isUuid } from "@/lib/ids.ts";
import { assertHubRoom } from "./assert-hub-room.ts";
import { assertMemberRoom } from "./assert-member-room.ts";
import { assertTeamHub, hubPermissionOrThrow, lockMembershipOrThrow } from "./hub-access.ts";
import type { AddMemberBody } from "./hub-fields.ts";
import { memberUserSelect, serializeMember } from "./serialize-hub.ts";
import { onMemberJoined } from "@/lib/notifications/notify.ts";
import { revokeOrphanedInvites } from "@/lib/invites/revoke-orphaned-invites.ts";
import { databaseNow } from "@/lib/db/database-now.ts";

/**
 * Adds an existing user directly; admins add contributors and viewers, only the
 * owner adds admins. A user id alone is not enough: the adder must already be
 * able to find the person, or this would add strangers and hand out their
 * e-mail addresses. Either this hub has a usable invite e-mailed to the
 * person's address (the adder typed it), or the adder is owner or admin of
 * another hub the person belongs to (where the adder already sees it).
 * Anyone else is "User not found", whether or not the id exists.
 */
export async function addMember(ctx: AuthContext, hubId: string, input: AddMemberBody) {
  const { hub, role } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "add members");
  assertTeamHub(hub, "shared");
  const adminsOnlyByOwner = () => new ApiError("forbidden", "Only the hub owner can add admins");
  if (input.role === "admin" && !can(role, "admins.manage")) throw adminsOnlyByOwner();
  const notFound = () => new ApiError("not_found", "User not found");
  const user = isUuid(input.user_id)
    ? await ctx.db.user.findUnique({ where: { id: input.user_id }, select: { id: true, email: true, emailUnverified: true } })
    : null;
  if (!user) throw notFound();
  const now = ctx.now();
  // The invite vouches only for an account that proved the address: a password sign-up may hold someone
  // else's, and the adder, who meant the mailbox's owner, would let the squatter in.
  const invite = user.emailUnverified ? null : await ctx.db.invite.findFirst({
    where: { hubId: hub.id, state: "active", expiresAt: { gt: now }, email: { equals: user.email, mode: "insensitive" } },
    select: { id: true },
  });
  if (!invite) {
    const shared = await ctx.db.hubMember.findFirst({
      where: { userId: user.id, hub: { members: { some: { userId: ctx.user.id, role: { in: ["owner", "admin"] } } } } },
      select: { hubId: true },
    });
    if (!shared) throw notFound();
  }
  try {
    const member = await ctx.db.$transaction(async (tx) => {
      await assertHubRoom(tx, user.id, "they");
      // The adder's own role again, under the hub's membership lock (after the per-user lock, as accepting
      // an invite takes them): an admin removed or demoted meanwhile adds no one once that change has returned.
      const current = await lockMembershipOrThrow(tx, ctx, hub, "hub.manage", "add members");
      if (input.role === "admin" && !can(current.role, "admins.manage")) throw adminsOnlyByOwner();
      await assertMemberRoom(tx, hub.id);
      // Links they made in an earlier membership, dead since they left, stay dead (they held no slot).
      await revokeOrphanedInvites(tx, hub.id, user.id, now);
      // The database's clock: a resumed stream replays the hub's events from joined_at on, and they are
      // stamped by that clock (the app's may run ahead of it, and then the member's first events were lost).
      const created = await tx.hubMember.create({
        data: { hubId: hub.id, userId: user.id, role: input.role, joinedAt: await databaseNow(tx) },
        include: { user: memberUserSelect },
      });
      // The invite that made them findable has done its job.
      if (invite) {
        await tx.invite.updateMany({ where: { id: invite.id, state: "active" }, data: { state: "accepted", acceptedBy: user.id, acceptedAt: now } });
      }
      await onMemberJoined(tx, { hub, userId: user.id, role: input.role, actorId: ctx.user.id, now, inviteId: invite?.id });
      return created;
    });
    return serializeMember(member, { id: ctx.user.id, role });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError("already_member", "This user is already a member of the hub");
    throw error;
  }
}
