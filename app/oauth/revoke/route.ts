import { serverSecret } from "@/lib/api/server-secret.ts";
import { methodsNotAllowed } from "@/lib/api/with-auth.ts";
import { ACCESS_TOKEN_PREFIX, verifyAccessToken } from "@/lib/auth/access-token.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { revokeGrant } from "@/lib/oauth/exchange-token.ts";
import { corsPreflight, oauthRoute, readOAuthParams } from "@/lib/oauth/oauth-route.ts";

// POST /oauth/revoke — RFC 7009: revoking a refresh or access token ends its whole grant
export const POST = oauthRoute(async (ctx, req) => {
  const params = await readOAuthParams(req);
  const token = params.get("token") ?? "";
  const clientId = params.get("client_id");
  let grantId: string | undefined;
  if (token.startsWith(ACCESS_TOKEN_PREFIX)) {
    const check = verifyAccessToken(await serverSecret(ctx.db), token, ctx.now().getTime());
    if (check.ok) grantId = check.grantId;
  } else if (token) {
    grantId = (await ctx.db.oAuthRefreshToken.findUnique({ where: { tokenHash: hashSecret(token) }, select: { grantId: true } }))?.grantId;
  }
  if (grantId) {
    const grant = await ctx.db.oAuthGrant.findUnique({ where: { id: grantId }, select: { clientId: true } });
    // Only the client the token was issued to may revoke it; anything else is answered the same way.
    if (grant && (!clientId || grant.clientId === clientId)) await revokeGrant(ctx.db, grantId, "revoked_by_client", ctx.now());
  }
  return new Response(null, { status: 200, headers: { "Cache-Control": "no-store" } });
});

export const OPTIONS = corsPreflight;
export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");
