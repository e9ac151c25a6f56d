import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { IMPERSONATION_CLIENT_KIND, IMPERSONATION_TTL_SECONDS } from "@/lib/auth/impersonate-user.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import type { ListQuery } from "@/lib/hubs/hub-fields.ts";
import { isUuid } from "@/lib/ids.ts";

const positionSchema = z.tuple([z.iso.datetime(), z.uuid()]);

/**
 * The grants that connect an app: exchanged (a refresh token is left), with a code that can still
 * be exchanged, or an administrator's impersonation while its token lives (no token to exchange,
 * shown to its user). A consent whose code expired unexchanged connected nothing, nor does an
 * impersonation past its 15 minutes (it cannot be refreshed); the hourly prune deletes both.
 */
export function listedGrant(now: Date) {
  const impersonationSince = new Date(now.getTime() - IMPERSONATION_TTL_SECONDS * 1000);
  return {
    OR: [
      { refreshTokens: { some: {} } },
      { codes: { some: { expiresAt: { gt: now } } } },
      { client: { kind: IMPERSONATION_CLIENT_KIND }, createdAt: { gt: impersonationSince } },
    ],
  } satisfies Prisma.OAuthGrantWhereInput;
}

/** The caller's active OAuth grants, newest first: which app reaches which hubs, with what access. */
export async function listGrants(ctx: Pick<AuthContext, "db" | "user" | "credential" | "now">, query: ListQuery) {
  // Each grant names the hubs it reaches: not for a key limited to some hubs (see listApiKeys).
  if (ctx.credential.hubIds !== null) {
    throw new ApiError("forbidden", "This API key is limited to some hubs; listing the account's connected apps needs a key for the whole account");
  }
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const after = query.cursor ? decodeCursor(secret, "oauth-grants", ctx.user.id, query.cursor, positionSchema) : undefined;
  const rows = await ctx.db.oAuthGrant.findMany({
    where: {
      userId: ctx.user.id,
      revokedAt: null,
      AND: [listedGrant(ctx.now())],
      ...(after && { OR: [{ createdAt: { lt: new Date(after[0]) } }, { createdAt: new Date(after[0]), id: { lt: after[1] } }] }),
    },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: limit + 1,
    include: { client: { select: { name: true, clientUri: true, kind: true } } },
  });
  const result = page("grants", rows, limit, (last) => encodeCursor(secret, "oauth-grants", ctx.user.id, [last.createdAt.toISOString(), last.id]));
  return {
    ...result,
    grants: result.grants.map((g) => ({
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
    })),
  };
}

/** Revokes one of the caller's grants: its tokens stop working on the very next request. */
export async function revokeOwnGrant(ctx: Pick<AuthContext, "db" | "user" | "now">, id: string): Promise<{ id: string; revoked: true }> {
  const updated = isUuid(id)
    ? await ctx.db.oAuthGrant.updateMany({ where: { id, userId: ctx.user.id, revokedAt: null }, data: { revokedAt: ctx.now(), revokedReason: "revoked_by_user" } })
    : { count: 0 };
  if (updated.count === 0) throw new ApiError("not_found", "Grant not found");
  return { id, revoked: true };
}
