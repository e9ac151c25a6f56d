import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUuid } from "@/lib/ids.ts";

/** Revokes one of the caller's keys; it stops working on the very next request. */
export async function revokeApiKey(ctx: AuthContext, id: string): Promise<{ id: string; revoked: true }> {
  const updated = isUuid(id)
    ? await ctx.db.apiKey.updateMany({ where: { id, userId: ctx.user.id, revokedAt: null }, data: { revokedAt: ctx.now() } })
    : { count: 0 };
  if (updated.count === 0) throw new ApiError("not_found", "API key not found");
  return { id, revoked: true };
}
