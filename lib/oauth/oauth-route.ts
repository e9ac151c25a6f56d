import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { readBody } from "@/lib/api/parse.ts";
import { toApiError, withPublic, type RouteHandler } from "@/lib/api/with-auth.ts";
import { OAuthError, oauthErrorResponse } from "./oauth-error.ts";

const CORS = {
  "Access-Control-Allow-Origin": "*",
  "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
  "Access-Control-Allow-Headers": "authorization, content-type, mcp-protocol-version",
  // A browser hides every other response header from the page: a 429's or 503's Retry-After, a 401's challenge.
  "Access-Control-Expose-Headers": "Retry-After, WWW-Authenticate, X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset",
  "Access-Control-Max-Age": "86400",
};

/**
 * An OAuth endpoint: no credential, rate-limited per address, errors as RFC 6749 JSON.
 * Browser-based MCP clients call these cross-origin; they carry no cookies, so CORS is open.
 */
export function oauthRoute(handler: (ctx: RequestContext, req: Request) => Promise<Response>, options: { cors?: boolean } = {}): RouteHandler {
  // errorResponse: the wrapper's own refusals (the per-address limit, a database that cannot be opened) in the same shape as the handler's.
  const route = withPublic({ bucket: "light", errorResponse: oauthErrorResponse }, async (ctx, req) => {
    try {
      return await handler(ctx, req);
    } catch (error) {
      return oauthErrorResponse(error instanceof OAuthError ? error : toApiError(error, ctx.requestId));
    }
  });
  if (options.cors === false) return route;
  // Outside the wrapper: its own answers (the per-address limit's 429, a database down) carried no CORS, so a browser saw a network error.
  return async (req, context) => {
    const response = await route(req, context);
    for (const [name, value] of Object.entries(CORS)) response.headers.set(name, value);
    return response;
  };
}

/** Preflight answer for the CORS-enabled OAuth and MCP endpoints. */
export async function corsPreflight(): Promise<Response> {
  return new Response(null, { status: 204, headers: CORS });
}

export const MAX_FORM_BYTES = 64 * 1024;

/**
 * At most `maxBytes` of the body, or `tooLarge`. These endpoints answer anyone, so the body is
 * read in bounded steps: a client streaming without end must not make the server buffer it all.
 */
export async function readOAuthBody(req: Request, maxBytes: number, tooLarge: Error): Promise<string> {
  try {
    return await readBody(req, maxBytes);
  } catch (error) {
    if (error instanceof ApiError && error.code === "body_too_large") throw tooLarge;
    throw error;
  }
}

/** An OAuth request body: form-encoded (the standard) or JSON (some clients), as URLSearchParams. */
export async function readOAuthParams(req: Request): Promise<URLSearchParams> {
  const text = await readOAuthBody(req, MAX_FORM_BYTES, new OAuthError("invalid_request", "Request body too large"));
  const type = req.headers.get("content-type") ?? "";
  if (!type.includes("application/json")) return new URLSearchParams(text);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new OAuthError("invalid_request", "The body is not valid JSON");
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) throw new OAuthError("invalid_request", "The body must be an object");
  const params = new URLSearchParams();
  for (const [key, v] of Object.entries(value)) if (typeof v === "string") params.set(key, v);
  return params;
}
