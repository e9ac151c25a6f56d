import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { MAX_API_KEYS_PER_USER } from "./create-api-key.ts";
import { serializeApiKey, type ApiKeyObject } from "./serialize-api-key.ts";

/**
 * The caller's keys that are not revoked, newest first, without secrets: a plain array (the
 * clients iterate it), bounded by MAX_API_KEYS_PER_USER active keys per user.
 */
export async function listApiKeys(ctx: AuthContext): Promise<ApiKeyObject[]> {
  // The other keys name the hubs they are limited to (ids and slugs): a key limited to some hubs
  // must not learn of hubs beyond them, so the account's key list needs a key for the whole account.
  if (ctx.credential.hubIds !== null) {
    throw new ApiError("forbidden", "This API key is limited to some hubs; listing the account's API keys needs a key for the whole account");
  }
  const rows = await ctx.db.apiKey.findMany({
    where: { userId: ctx.user.id, revokedAt: null },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: MAX_API_KEYS_PER_USER,
  });
  const hubIds = [...new Set(rows.flatMap((row) => row.hubIds))];
  // Only hubs the caller is still a member of: a hub left since keeps its id in the key (which no longer
  // opens it), but its slug, chosen or renamed after the caller left, is no longer theirs to read.
  const hubs = hubIds.length
    ? await ctx.db.hub.findMany({ where: { id: { in: hubIds }, members: { some: { userId: ctx.user.id } } }, select: { id: true, slug: true } })
    : [];
  const slugs = new Map(hubs.map((hub) => [hub.id, hub.slug]));
  return rows.map((row) => serializeApiKey(row, slugs));
}
