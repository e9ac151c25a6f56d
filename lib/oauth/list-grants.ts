import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUuid } from "@/lib/ids.ts";

/** At most this many connected apps are listed (newest first); more is unusual and each can be revoked. */
export const MAX_LISTED_GRANTS = 100;

/** The caller's active OAuth grants: which app reaches which hubs, with what access. */
export async function listGrants(ctx: Pick<AuthContext, "db" | "user">) {
  const rows = await ctx.db.oAuthGrant.findMany({
    where: { userId: ctx.user.id, revokedAt: null },
    orderBy: { createdAt: "desc" },
    take: MAX_LISTED_GRANTS,
    include: { client: { select: { name: true, clientUri: true, kind: true } } },
  });
  return rows.map((g) => ({
    id: g.id,
    client_id: g.clientId,
    client_name: g.client.name,
    client_uri: g.client.clientUri,
    hub_ids: g.allHubs ? null : g.hubIds,
    all_hubs: g.allHubs,
    scopes: g.scope.split(" "),
    resource: g.resource,
    created_at: g.createdAt.toISOString(),
    last_used_at: g.lastUsedAt?.toISOString() ?? null,
  }));
}

/** Revokes one of the caller's grants: its tokens stop working on the very next request. */
export async function revokeOwnGrant(ctx: Pick<AuthContext, "db" | "user" | "now">, id: string): Promise<{ id: string; revoked: true }> {
  const updated = isUuid(id)
    ? await ctx.db.oAuthGrant.updateMany({ where: { id, userId: ctx.user.id, revokedAt: null }, data: { revokedAt: ctx.now(), revokedReason: "revoked_by_user" } })
    : { count: 0 };
  if (updated.count === 0) throw new ApiError("not_found", "Grant not found");
  return { id, revoked: true };
}
