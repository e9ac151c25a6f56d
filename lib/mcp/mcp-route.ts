import { withAuth, type RouteHandler } from "@/lib/api/with-auth.ts";
import { bearerChallenge, publicOrigin, resourceFor } from "@/lib/oauth/public-origin.ts";
import type { ToolDef } from "./mcp-tools.ts";
import { serveMcp } from "./serve-mcp.ts";

/**
 * An MCP endpoint: bearer credentials only (API keys, or OAuth access tokens bound to this
 * endpoint's resource), never the dashboard cookie; a 401 points clients at the OAuth metadata.
 */
export function mcpRoute(path: string, tools: ToolDef[]): RouteHandler {
  return withAuth(
    {
      bearer: {
        resources: (req) => [resourceFor(publicOrigin(req), path)],
        challenge: (req) => bearerChallenge(publicOrigin(req), path, req.headers.get("authorization") ? "invalid_token" : undefined),
      },
    },
    (ctx, req) => serveMcp(ctx, req, tools, publicOrigin(req)),
  );
}
