import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { looksLikeInviteToken } from "./invite-token.ts";
import { inviteState } from "./serialize-invite.ts";

/** What the join page shows to whoever holds the link (no credential); dead invites report their state. */
export async function getPublicInvite(ctx: RequestContext, token: string) {
  const invite = looksLikeInviteToken(token)
    ? await ctx.db.invite.findUnique({
        where: { tokenHash: hashSecret(token) },
        include: { hub: { select: { id: true, name: true, slug: true, _count: { select: { members: true } } } }, creator: { select: { name: true } } },
      })
    : null;
  if (!invite) throw new ApiError("not_found", "Invite not found");
  return {
    invite: { role: invite.role, expires_at: invite.expiresAt.toISOString(), state: inviteState(invite, ctx.now()) },
    hub: { id: invite.hub.id, name: invite.hub.name, slug: invite.hub.slug },
    member_count: invite.hub._count.members,
    invited_by: { name: invite.creator.name },
  };
}
