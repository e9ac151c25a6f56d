import type { AuthContext } from "@/lib/api/context.ts";
import { isUuid } from "@/lib/ids.ts";

export interface RevokeApiKeyResult {
  id: string;
  revoked: boolean;
  /** Memax's partial-result shape: why nothing was revoked. */
  skipped: { id: string; reason: "not_found" }[];
}

/**
 * Revokes one of the caller's keys; it stops working on the very next request. Idempotent:
 * an unknown, foreign or already revoked key answers `{ revoked: false }` (the wanted end state).
 */
export async function revokeApiKey(ctx: AuthContext, id: string): Promise<RevokeApiKeyResult> {
  const updated = isUuid(id)
    ? await ctx.db.apiKey.updateMany({ where: { id, userId: ctx.user.id, revokedAt: null }, data: { revokedAt: ctx.now() } })
    : { count: 0 };
  return updated.count > 0 ? { id, revoked: true, skipped: [] } : { id, revoked: false, skipped: [{ id, reason: "not_found" }] };
}
