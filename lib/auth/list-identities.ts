import type { AuthContext } from "@/lib/api/context.ts";

/** At most this many identities are listed (one per provider account; GitHub and Google are the providers). */
export const MAX_IDENTITIES = 100;

/** Memax's AuthIdentity. */
export interface AuthIdentity {
  id: string;
  user_id: string;
  provider: string;
  provider_id: string;
  provider_email: string;
  provider_name: string;
  created_at: string;
}

/** GET /v1/auth/identities: the sign-in provider accounts linked to the caller, oldest first. */
export async function listIdentities(ctx: AuthContext): Promise<AuthIdentity[]> {
  const rows = await ctx.db.oAuthAccount.findMany({ where: { userId: ctx.user.id }, orderBy: [{ createdAt: "asc" }, { id: "asc" }], take: MAX_IDENTITIES });
  return rows.map((row) => ({
    id: row.id,
    user_id: row.userId,
    provider: row.provider,
    provider_id: row.providerAccountId,
    provider_email: row.providerEmail,
    provider_name: row.providerName,
    created_at: row.createdAt.toISOString(),
  }));
}
