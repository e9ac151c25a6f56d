import { serverSecret } from "@/lib/api/server-secret.ts";
import { ACCESS_TOKEN_PREFIX, verifyAccessToken } from "@/lib/auth/access-token.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import type { Db } from "@/lib/db/database.ts";
import { revokeGrant } from "./exchange-token.ts";
import { OAuthError } from "./oauth-error.ts";

/**
 * POST /oauth/revoke (RFC 7009): revoking a refresh or access token ends its whole grant. A request
 * without a token is malformed (§2.1); an unknown token, or one issued to another client, is
 * answered as a revoked one (§2.2), so the endpoint tells no one which tokens exist.
 */
export async function revokeToken(db: Db, params: URLSearchParams, now: Date): Promise<void> {
  const token = params.get("token");
  if (!token) throw new OAuthError("invalid_request", "token is required");
  const clientId = params.get("client_id");
  let grantId: string | undefined;
  if (token.startsWith(ACCESS_TOKEN_PREFIX)) {
    const check = verifyAccessToken(await serverSecret(db), token, now.getTime());
    if (check.ok) grantId = check.grantId;
  } else {
    grantId = (await db.oAuthRefreshToken.findUnique({ where: { tokenHash: hashSecret(token) }, select: { grantId: true } }))?.grantId;
  }
  if (!grantId) return;
  const grant = await db.oAuthGrant.findUnique({ where: { id: grantId }, select: { clientId: true } });
  if (grant && (!clientId || grant.clientId === clientId)) await revokeGrant(db, grantId, "revoked_by_client", now);
}
