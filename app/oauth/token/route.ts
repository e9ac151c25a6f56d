import { knownClientAddress } from "@/lib/api/client-address.ts";
import { methodsNotAllowed } from "@/lib/api/with-auth.ts";
import { exchangeToken } from "@/lib/oauth/exchange-token.ts";
import { oauthJson } from "@/lib/oauth/oauth-error.ts";
import { corsPreflight, oauthRoute, readOAuthParams } from "@/lib/oauth/oauth-route.ts";

// POST /oauth/token — authorization_code (PKCE S256) and rotating refresh_token grants
export const POST = oauthRoute(async (ctx, req) => oauthJson(await exchangeToken(ctx.db, await readOAuthParams(req), ctx.now(), knownClientAddress(req))));

export const OPTIONS = corsPreflight;
export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");
