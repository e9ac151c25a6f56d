import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { makerCanGrant } from "./invite-or-throw.ts";
import { looksLikeInviteToken } from "./invite-token.ts";
import { inviteState } from "./serialize-invite.ts";

/**
 * What the join page shows to whoever holds the link (no credential). `invited_by` is the inviter's
 * name, a string (the Memax SDK's InviteDetails); nothing here names an e-mail address. The hub carries
 * `owner_id` because the SDK's Hub type requires it (an opaque id; the settings stay members-only).
 *
 * A link that no longer admits anyone (revoked, expired, used, or its maker can no longer grant its
 * role) answers the same shape: the SDK's InviteDetails requires it, and `state` is what tells the
 * join page the link is dead.
 */
export async function getPublicInvite(ctx: RequestContext, token: string) {
  const invite = looksLikeInviteToken(token)
    ? await ctx.db.invite.findUnique({
        where: { tokenHash: hashSecret(token) },
        include: {
          hub: { select: { id: true, name: true, slug: true, hubType: true, ownerId: true, icon: true, accent: true, _count: { select: { members: true } } } },
          creator: { select: { name: true } },
        },
      })
    : null;
  if (!invite) throw new ApiError("not_found", "Invite not found");
  const stored = inviteState(invite, ctx.now());
  // A link whose maker can no longer grant its role is refused as revoked on accept: the join page says so
  // up front instead of offering a Join that fails.
  const state = stored === "active" && !(await makerCanGrant(ctx.db, invite)) ? "revoked" : stored;
  const { hub } = invite;
  return {
    invite: {
      id: invite.id,
      hub_id: invite.hubId,
      role: invite.role,
      created_at: invite.createdAt.toISOString(),
      expires_at: invite.expiresAt.toISOString(),
      state,
    },
    hub: { id: hub.id, name: hub.name, slug: hub.slug, hub_type: hub.hubType, owner_id: hub.ownerId, ...(hub.icon && { icon: hub.icon }), ...(hub.accent && { accent: hub.accent }) },
    member_count: hub._count.members,
    invited_by: invite.creator.name,
  };
}
