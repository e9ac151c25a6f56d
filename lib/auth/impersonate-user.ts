import { z } from "zod";
import type { RequestContext } from "@/lib/api/context.ts";
import { atLeastOneOf } from "@/lib/api/at-least-one-of.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { newId, uuidField } from "@/lib/ids.ts";
import { resourceFor } from "@/lib/oauth/public-origin.ts";
import { issueAccessToken } from "./access-token.ts";
import { apiKeysLockKey } from "./create-api-key.ts";

/** The client impersonation grants name; no flow can use it (no redirect URIs, its own kind). */
export const IMPERSONATION_CLIENT_ID = "engram-admin";
export const IMPERSONATION_CLIENT_KIND = "impersonation";
export const IMPERSONATION_TTL_SECONDS = 900;

export const impersonateBodySchema = atLeastOneOf(
  z.object({
    user_id: uuidField("user_id must be a user id").optional(),
    email: z.string().trim().max(320).optional(),
  }),
  ["user_id", "email"],
  { message: "provide user_id or email", path: ["user_id"] },
);
export type ImpersonateBody = z.output<typeof impersonateBodySchema>;

/**
 * POST /v1/auth/impersonate (ENGRAM_ADMIN_TOKEN): a 15-minute access token that acts as another
 * user, for support. It is an OAuth access token of a grant named "Administrator (impersonation)",
 * so it has every hub and write access but cannot manage keys or connected apps, it cannot be
 * refreshed, and the person sees the grant among their connected apps (and can end it there).
 */
export async function impersonateUser(ctx: RequestContext, input: ImpersonateBody, origin: string) {
  const user = input.user_id
    ? await ctx.db.user.findUnique({ where: { id: input.user_id } })
    : await ctx.db.user.findUnique({ where: { email: input.email!.toLowerCase() } });
  if (!user) throw new ApiError("not_found", "User not found");
  const now = ctx.now();
  const resource = resourceFor(origin, "/mcp");
  const grant = await ctx.db.$transaction(async (tx) => {
    // A claim (claim-account.ts) revokes the account's grants under this lock: a grant made during
    // one then lands wholly before it (and is revoked) or after it.
    await lockForTransaction(tx, apiKeysLockKey(user.id));
    await tx.oAuthClient.upsert({
      where: { id: IMPERSONATION_CLIENT_ID },
      create: { id: IMPERSONATION_CLIENT_ID, name: "Administrator (impersonation)", redirectUris: [], kind: IMPERSONATION_CLIENT_KIND },
      update: {},
    });
    return tx.oAuthGrant.create({
      data: { id: newId(now.getTime()), userId: user.id, clientId: IMPERSONATION_CLIENT_ID, hubIds: [], allHubs: true, scope: "read write", resource, createdAt: now },
    });
  });
  console.info(`[admin] impersonation of user ${user.id} (grant ${grant.id}) for ${IMPERSONATION_TTL_SECONDS} s`);
  const accessToken = issueAccessToken(await serverSecret(ctx.db), { userId: user.id, grantId: grant.id, resource }, now.getTime(), IMPERSONATION_TTL_SECONDS);
  return { access_token: accessToken, expires_in: IMPERSONATION_TTL_SECONDS, target_id: user.id, impersonated: true as const };
}
