import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { CLI_CLIENT_ID, ensureCliClient, isCliRedirectUri } from "./cli-client.ts";

/**
 * GET /v1/auth/github|google?redirect_uri=…: where `memax login` sends the browser. Engram signs
 * people in with whatever its dashboard offers (password, or the GitHub or Google sign-in when
 * configured), so both paths lead to the same authorization request of the built-in CLI client:
 * sign in if needed, consent, then a code to the CLI's loopback address.
 */
export async function startCliLogin(ctx: RequestContext, req: Request): Promise<Response> {
  const url = new URL(req.url);
  const redirectUri = url.searchParams.get("redirect_uri");
  // An unverified redirect target never receives anything: the error goes to whoever opened the link.
  if (!redirectUri) throw new ApiError("invalid_request", "redirect_uri is required: start the sign-in with `memax login`");
  if (!isCliRedirectUri(redirectUri)) {
    throw new ApiError("invalid_request", "redirect_uri must be an http address on localhost or 127.0.0.1, where the CLI waits for the sign-in");
  }
  await ensureCliClient(ctx.db);
  const params = new URLSearchParams({ response_type: "code", client_id: CLI_CLIENT_ID, redirect_uri: redirectUri, scope: "read write" });
  const state = url.searchParams.get("state");
  if (state) params.set("state", state);
  return new Response(null, { status: 302, headers: { location: `/oauth/authorize?${params}`, "cache-control": "no-store", "referrer-policy": "no-referrer" } });
}
