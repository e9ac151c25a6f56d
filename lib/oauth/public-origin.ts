import { config } from "@/lib/config.ts";

/** MCP endpoints, each its own protected resource (RFC 8707 / RFC 9728). */
export const MCP_PATHS = ["/mcp", "/mcp/chatgpt"] as const;

const HOST = /^[a-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-f:.]+\](:\d{1,5})?$/i;

/**
 * This instance's public origin: ENGRAM_PUBLIC_URL when set, otherwise the origin the client
 * addressed (Host, or X-Forwarded-Host/-Proto from a proxy). `next start` reports every request
 * as localhost in `req.url`, so the headers are the truth about what the client used. A forged
 * Host only changes what that same client is told: tokens stay bound to the MCP path and signed.
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
  const url = new URL(req.url);
  const first = (name: string) => req.headers.get(name)?.split(",")[0]?.trim() || undefined;
  const host = first("x-forwarded-host") ?? first("host");
  const proto = first("x-forwarded-proto") ?? url.protocol.slice(0, -1);
  if (!host || !HOST.test(host) || (proto !== "http" && proto !== "https")) return url.origin;
  // URL normalises case and default ports (https://x:443 → https://x), as clients do.
  try {
    return new URL(`${proto}://${host}`).origin;
  } catch {
    // The pattern lets through what URL still refuses (a port over 65535): a header the client sent, not a server fault.
    return url.origin;
  }
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
