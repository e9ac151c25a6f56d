import { methodsNotAllowed, withAuth, type RouteHandler } from "@/lib/api/with-auth.ts";
import { bearerChallenge, publicOrigin, resourceFor } from "@/lib/oauth/public-origin.ts";
import type { ToolDef } from "./mcp-tools.ts";
import { mcpErrorResponse, serveMcp } from "./serve-mcp.ts";

/**
 * An MCP endpoint: bearer credentials only (API keys, or OAuth access tokens bound to this
 * endpoint's resource), never the dashboard cookie; a 401 points clients at the OAuth metadata,
 * and any other error is a JSON-RPC error (mcpErrorResponse).
 */
export function mcpRoute(path: string, tools: ToolDef[]): RouteHandler {
  const handler = withAuth(
    {
      // Every call is a POST; read-only credentials are refused per tool (writes), not per request.
      reads: true,
      // serveMcp charges each tool call as its REST request, and refuses with a JSON-RPC error.
      chargedByHandler: true,
      bearer: {
        resources: (req) => [resourceFor(publicOrigin(req), path)],
        challenge: (req) => bearerChallenge(publicOrigin(req), path, req.headers.get("authorization") ? "invalid_token" : undefined),
      },
      // Every other refusal (503, 500, …) as a JSON-RPC error, as serveMcp's rate-limit refusal is.
      errorResponse: mcpErrorResponse,
    },
    (ctx, req) => serveMcp(ctx, req, tools, publicOrigin(req)),
  );
  return withMcpCors(handler);
}

// Browser-based clients (e.g. the MCP Inspector) call cross-origin; only bearer credentials count here, so CORS is open.
function withMcpCors(handler: RouteHandler): RouteHandler {
  return async (req, context) => {
    const response = await handler(req, context);
    for (const [name, value] of Object.entries(MCP_CORS)) response.headers.set(name, value);
    return response;
  };
}

/**
 * 405 for the methods an MCP endpoint does not serve, readable cross-origin: a client probes GET (a
 * server-to-client stream) and sends DELETE (ending a session), and must see the 405 the MCP transport
 * expects rather than a CORS failure it cannot tell from a network error.
 */
export function mcpMethodsNotAllowed(): Record<"GET" | "PUT" | "PATCH" | "DELETE", RouteHandler> {
  const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");
  return { GET: withMcpCors(GET), PUT: withMcpCors(PUT), PATCH: withMcpCors(PATCH), DELETE: withMcpCors(DELETE) };
}

const MCP_CORS = {
  "Access-Control-Allow-Origin": "*",
  // A browser client reads only these: a 429's Retry-After and the limits too, or it cannot know when to retry.
  "Access-Control-Expose-Headers": "WWW-Authenticate, Mcp-Session-Id, X-Request-Id, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset",
};

/** Preflight of the MCP endpoints. */
export async function mcpPreflight(): Promise<Response> {
  return new Response(null, {
    status: 204,
    headers: {
      ...MCP_CORS,
      // GET and DELETE too, so that their 405 reaches the client (above).
      "Access-Control-Allow-Methods": "GET, POST, DELETE, OPTIONS",
      // Mcp-Method and Mcp-Name: the 2026-07-28 revision sends them on every request (Mcp-Name on a tools/call).
      "Access-Control-Allow-Headers": "authorization, content-type, accept, mcp-protocol-version, mcp-method, mcp-name, mcp-session-id, last-event-id",
      "Access-Control-Max-Age": "86400",
    },
  });
}
