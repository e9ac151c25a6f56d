import { methodsNotAllowed } from "@/lib/api/with-auth.ts";
import { oauthJson } from "@/lib/oauth/oauth-error.ts";
import { protectedResourceMetadata } from "@/lib/oauth/oauth-metadata.ts";
import { corsPreflight, oauthRoute } from "@/lib/oauth/oauth-route.ts";
import { publicOrigin } from "@/lib/oauth/public-origin.ts";

// GET /.well-known/oauth-protected-resource — RFC 9728 metadata for clients that look at the root (the /mcp resource)
export const GET = oauthRoute(async (_ctx, req) => oauthJson(protectedResourceMetadata(publicOrigin(req), "/mcp")));

export const OPTIONS = corsPreflight;
export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");
