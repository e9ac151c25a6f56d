import type { AuthContext } from "@/lib/api/context.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { MAX_ACTIVE_INVITES } from "./invite-fields.ts";
import { serializeInvite } from "./serialize-invite.ts";
import { orphanedInviteWhere, usableInviteWhere } from "./usable-invite-where.ts";

/**
 * Usable invites (active, not expired, their maker still able to grant them), newest first, without
 * their tokens, as one array: a hub has at most MAX_ACTIVE_INVITES of them (create and regenerate
 * enforce it under a lock). After them, at most as many links whose maker has left or been demoted,
 * shown as `revoked` (accepting them answers that) so a manager can regenerate or revoke them; they
 * no longer take a slot, so they must not push a usable link off the list either.
 */
export async function listInvites(ctx: AuthContext, hubId: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "see invites");
  const now = ctx.now();
  const newestFirst = [{ createdAt: "desc" as const }, { id: "desc" as const }];
  const [usable, orphaned] = await Promise.all([
    ctx.db.invite.findMany({ where: usableInviteWhere(hub.id, now), orderBy: newestFirst, take: MAX_ACTIVE_INVITES }),
    ctx.db.invite.findMany({ where: orphanedInviteWhere(hub.id, now), orderBy: newestFirst, take: MAX_ACTIVE_INVITES }),
  ]);
  return [...usable.map((invite) => serializeInvite(invite, now)), ...orphaned.map((invite) => ({ ...serializeInvite(invite, now), state: "revoked" }))];
}
