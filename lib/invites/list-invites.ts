import type { AuthContext } from "@/lib/api/context.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { MAX_ACTIVE_INVITES } from "./invite-fields.ts";
import { roleCanGrant } from "./invite-or-throw.ts";
import { serializeInvite } from "./serialize-invite.ts";

/**
 * Usable invites (active, not expired), newest first, without their tokens, as
 * one array: a hub has at most MAX_ACTIVE_INVITES of them (create and
 * regenerate enforce it under a lock).
 */
export async function listInvites(ctx: AuthContext, hubId: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "see invites");
  const now = ctx.now();
  const rows = await ctx.db.invite.findMany({
    where: { hubId: hub.id, state: "active", expiresAt: { gt: now } },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: MAX_ACTIVE_INVITES,
  });
  // As the join page and accepting read it: a link whose maker can no longer grant its role is
  // revoked (regenerating it makes the caller its maker). One read for every maker of the page.
  const makers = await ctx.db.hubMember.findMany({ where: { hubId: hub.id, userId: { in: [...new Set(rows.map((row) => row.createdBy))] } }, select: { userId: true, role: true } });
  const roleOf = new Map(makers.map((maker) => [maker.userId, maker.role]));
  return rows.map((invite) => ({ ...serializeInvite(invite, now), ...(!roleCanGrant(roleOf.get(invite.createdBy), invite.role) && { state: "revoked" }) }));
}
