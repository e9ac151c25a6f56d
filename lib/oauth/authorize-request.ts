import type { Db } from "@/lib/db/database.ts";
import { CLI_CLIENT_KIND, isCliRedirectUri } from "./cli-client.ts";
import { findClient, type OAuthClientInfo } from "./find-client.ts";
import { knownResources } from "./oauth-metadata.ts";
import { OAuthError } from "./oauth-error.ts";
import { resourceFor } from "./public-origin.ts";

export interface AuthorizeRequest {
  client: OAuthClientInfo;
  redirectUri: string;
  state: string | undefined;
  /** Empty for the built-in CLI client's requests without PKCE. */
  codeChallenge: string;
  resource: string;
  /** The client asked for write access (or did not narrow its request). */
  wantsWrite: boolean;
}

export type AuthorizeCheck =
  | { ok: true; request: AuthorizeRequest }
  /** redirectUri set: the error goes back to the client; otherwise it is shown to the user (the redirect target is not trusted). */
  | { ok: false; error: OAuthError; redirectUri?: string; state?: string };

const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/**
 * Validates an authorization request (OAuth 2.1 §4.1.1): the client and its exact redirect URI
 * first, since errors may only be sent to a verified redirect URI; then code + PKCE S256 and
 * the RFC 8707 resource.
 */
export async function checkAuthorizeRequest(db: Db, params: URLSearchParams, origin: string, now: Date, address?: string): Promise<AuthorizeCheck> {
  let client: OAuthClientInfo;
  try {
    client = await findClient(db, params.get("client_id"), now, address);
  } catch (error) {
    if (error instanceof OAuthError) return { ok: false, error };
    throw error;
  }
  const given = params.get("redirect_uri");
  const builtin = client.kind === CLI_CLIENT_KIND;
  const redirectUri = given ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  if (!redirectUri) return { ok: false, error: new OAuthError("invalid_request", "redirect_uri is required for a client with several redirect URIs") };
  if (builtin) {
    if (!isCliRedirectUri(redirectUri)) return { ok: false, error: new OAuthError("invalid_request", "redirect_uri must be an http address on localhost or 127.0.0.1, where the CLI waits for the sign-in") };
  } else if (!client.redirectUris.includes(redirectUri)) {
    // Exact string comparison (OAuth 2.1 §2.3.1; no prefix or pattern matching). Loopback ports are part of the match.
    return { ok: false, error: new OAuthError("invalid_request", "redirect_uri does not match any redirect URI registered for this client") };
  }
  const state = params.get("state") ?? undefined;
  const fail = (error: OAuthError): AuthorizeCheck => ({ ok: false, error, redirectUri, state });
  if (params.get("response_type") !== "code") return fail(new OAuthError("unsupported_response_type", "Only response_type=code is supported"));
  const challenge = params.get("code_challenge");
  // Only the built-in CLI client may go without PKCE; its codes are redeemed at /v1/auth/exchange alone.
  if (challenge || !builtin) {
    if (!challenge) return fail(new OAuthError("invalid_request", "code_challenge is required (PKCE)"));
    if (params.get("code_challenge_method") !== "S256") return fail(new OAuthError("invalid_request", "code_challenge_method must be S256"));
    if (!PKCE_CHALLENGE.test(challenge)) return fail(new OAuthError("invalid_request", "code_challenge must be a base64url SHA-256 (43 characters)"));
  }
  const resources = params.getAll("resource");
  if (resources.length > 1) return fail(new OAuthError("invalid_target", "Request one resource at a time"));
  const resource = resources[0] ?? resourceFor(origin, "/mcp");
  if (!knownResources(origin).includes(resource)) return fail(new OAuthError("invalid_target", `Unknown resource ${resource}; use ${resourceFor(origin, "/mcp")}`));
  const scopes = (params.get("scope") ?? "").split(" ").filter(Boolean);
  // Unknown scopes are ignored (the token response names what was granted); "read" alone means read-only.
  const wantsWrite = !scopes.includes("read") || scopes.includes("write");
  return { ok: true, request: { client, redirectUri, state, codeChallenge: challenge ?? "", resource, wantsWrite } };
}

/** The client's redirect URI with the response parameters (and `iss`, RFC 9207) added. */
export function redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(name, value);
  return url.toString();
}
