import { methodsNotAllowed } from "@/lib/api/with-auth.ts";
import { corsPreflight, oauthRoute, readOAuthParams } from "@/lib/oauth/oauth-route.ts";
import { revokeToken } from "@/lib/oauth/revoke-token.ts";

// POST /oauth/revoke — RFC 7009: revoking a refresh or access token ends its whole grant
export const POST = oauthRoute(async (ctx, req) => {
  await revokeToken(ctx.db, await readOAuthParams(req), ctx.now());
  return new Response(null, { status: 200, headers: { "Cache-Control": "no-store" } });
});

export const OPTIONS = corsPreflight;
export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");
