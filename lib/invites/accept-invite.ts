import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { assertHubRoom } from "@/lib/hubs/assert-hub-room.ts";
import { assertMemberRoom } from "@/lib/hubs/assert-member-room.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { assertActsForAccount, hubMembersLockKey } from "@/lib/hubs/hub-access.ts";
import { serializeHub } from "@/lib/hubs/serialize-hub.ts";
import { assertInviteUsable, assertMakerCanGrant } from "./invite-or-throw.ts";
import { looksLikeInviteToken } from "./invite-token.ts";
import { onMemberJoined } from "@/lib/notifications/notify.ts";
import { revokeOrphanedInvites } from "./revoke-orphaned-invites.ts";
import { databaseNow } from "@/lib/db/database-now.ts";

/**
 * Joins the caller to the invite's hub with its role. Single use: the invite
 * is claimed with a conditional update (state still active, not expired) in the
 * same transaction as the membership insert, so of two concurrent accepts one
 * wins and the other sees 410 used; a member already in the hub gets 409.
 */
export async function acceptInvite(ctx: AuthContext, token: string) {
  const tokenHash = hashSecret(token);
  const invite = looksLikeInviteToken(token) ? await ctx.db.invite.findUnique({ where: { tokenHash } }) : null;
  if (!invite) throw new ApiError("not_found", "Invite not found");
  assertActsForAccount(ctx.credential, "accept an invite");
  const now = ctx.now();
  assertInviteUsable(invite, now);
  const alreadyMember = () => new ApiError("already_member", "You are already a member of this hub", { hub_id: invite.hubId });
  if (await ctx.db.hubMember.findUnique({ where: { hubId_userId: { hubId: invite.hubId, userId: ctx.user.id } } })) throw alreadyMember();
  try {
    return await ctx.db.$transaction(async (tx) => {
      await assertHubRoom(tx, ctx.user.id);
      await lockForTransaction(tx, { shared: hubMembersLockKey(invite.hubId) });
      await assertMakerCanGrant(tx, invite);
      // Before the invite is claimed: a full hub leaves the link usable for when there is room.
      await assertMemberRoom(tx, invite.hubId);
      const { count } = await tx.invite.updateMany({
        where: { id: invite.id, tokenHash, state: "active", expiresAt: { gt: now } },
        data: { state: "accepted", acceptedBy: ctx.user.id, acceptedAt: now },
      });
      if (count === 0) {
        const current = await tx.invite.findUnique({ where: { id: invite.id } });
        if (!current || current.tokenHash !== tokenHash) throw new ApiError("revoked", "This invite link was replaced by a new one");
        assertInviteUsable(current, now);
        throw new ApiError("used", "This invite has already been used");
      }
      // Links they made in an earlier membership, dead since they left, stay dead (they held no slot).
      await revokeOrphanedInvites(tx, invite.hubId, ctx.user.id, now);
      // The database's clock, as the events replayed from it on (see addMember).
      const member = await tx.hubMember.create({ data: { hubId: invite.hubId, userId: ctx.user.id, role: invite.role, joinedAt: await databaseNow(tx) }, include: { hub: true } });
      await onMemberJoined(tx, { hub: member.hub, userId: ctx.user.id, role: member.role, actorId: ctx.user.id, now, inviteId: invite.id });
      return { hub: serializeHub(member.hub), role: member.role };
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw alreadyMember();
    throw error;
  }
}
