import { methodsNotAllowed } from "@/lib/api/with-auth.ts";
import { oauthJson } from "@/lib/oauth/oauth-error.ts";
import { protectedResourceMetadata } from "@/lib/oauth/oauth-metadata.ts";
import { corsPreflight, oauthRoute } from "@/lib/oauth/oauth-route.ts";
import { MCP_PATHS, publicOrigin } from "@/lib/oauth/public-origin.ts";

// GET /.well-known/oauth-protected-resource/{mcp path} — RFC 9728 metadata of /mcp and /mcp/chatgpt
export const GET = oauthRoute(async (_ctx, req) => {
  const path = new URL(req.url).pathname.slice("/.well-known/oauth-protected-resource".length);
  if (!(MCP_PATHS as readonly string[]).includes(path)) return oauthJson({ error: "not_found", error_description: `No protected resource at ${path}` }, 404);
  return oauthJson(protectedResourceMetadata(publicOrigin(req), path));
});

export const OPTIONS = corsPreflight;
export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");
