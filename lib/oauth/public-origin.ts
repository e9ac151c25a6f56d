import { config } from "@/lib/config.ts";

/** MCP endpoints, each its own protected resource (RFC 8707 / RFC 9728). */
export const MCP_PATHS = ["/mcp", "/mcp/chatgpt"] as const;

/**
 * This instance's public origin: ENGRAM_PUBLIC_URL when set (behind a proxy), otherwise the
 * origin the request was addressed to.
 */
export function publicOrigin(req: Request): string {
  const configured = config().publicUrl;
  if (configured) {
    try {
      return new URL(configured).origin;
    } catch {
      // A malformed setting falls back to the request's own origin.
    }
  }
  return new URL(req.url).origin;
}

export function resourceFor(origin: string, path: string): string {
  return `${origin}${path}`;
}

/** Where the protected-resource metadata of an MCP endpoint lives (RFC 9728 §3.1: inserted after the host). */
export function resourceMetadataUrl(origin: string, path: string): string {
  return `${origin}/.well-known/oauth-protected-resource${path}`;
}

/** The `WWW-Authenticate` challenge of an MCP endpoint's 401. */
export function bearerChallenge(origin: string, path: string, error?: string): string {
  return `Bearer resource_metadata="${resourceMetadataUrl(origin, path)}"${error ? `, error="${error}"` : ""}`;
}
