import { config } from "@/lib/config.ts";

/**
 * The origin clients reach Engram at, for URLs Engram hands out and serves
 * itself (signed blob URLs): ENGRAM_PUBLIC_URL, else what the client asked
 * for (Host / X-Forwarded-*), so a browser's upload stays same-origin.
 */
export function requestOrigin(req: Request): string {
  const configured = config().publicUrl;
  if (configured) return configured.replace(/\/+$/, "");
  const url = new URL(req.url);
  const host = req.headers.get("x-forwarded-host")?.split(",")[0]?.trim() || req.headers.get("host") || url.host;
  const proto = req.headers.get("x-forwarded-proto")?.split(",")[0]?.trim() || url.protocol.replace(/:$/, "");
  return `${proto === "https" ? "https" : "http"}://${host}`;
}
