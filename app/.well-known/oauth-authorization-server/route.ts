import { methodsNotAllowed } from "@/lib/api/with-auth.ts";
import { oauthJson } from "@/lib/oauth/oauth-error.ts";
import { authorizationServerMetadata } from "@/lib/oauth/oauth-metadata.ts";
import { corsPreflight, oauthRoute } from "@/lib/oauth/oauth-route.ts";
import { publicOrigin } from "@/lib/oauth/public-origin.ts";

// GET /.well-known/oauth-authorization-server — RFC 8414 authorization server metadata
export const GET = oauthRoute(async (_ctx, req) => oauthJson(authorizationServerMetadata(publicOrigin(req))));

export const OPTIONS = corsPreflight;
export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");
