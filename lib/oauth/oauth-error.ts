import type { ApiError } from "@/lib/api/errors.ts";

/** RFC 6749 §5.2 error codes (plus RFC 8707's invalid_target and RFC 7591's registration errors). */
export type OAuthErrorCode =
  | "invalid_request"
  | "invalid_client"
  | "invalid_grant"
  | "unauthorized_client"
  | "unsupported_grant_type"
  | "unsupported_response_type"
  | "invalid_scope"
  | "invalid_target"
  | "access_denied"
  | "server_error"
  | "temporarily_unavailable"
  | "invalid_redirect_uri"
  | "invalid_client_metadata";

/** An OAuth protocol error: `{error, error_description}` on the wire, never the REST envelope. */
export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status = error === "invalid_client" ? 401 : error === "server_error" ? 500 : error === "temporarily_unavailable" ? 503 : 400,
    readonly headers: Record<string, string> = {},
  ) {
    super(description);
    this.name = "OAuthError";
  }
}

export function oauthJson(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return Response.json(body, { status, headers: { "Cache-Control": "no-store", Pragma: "no-cache", ...headers } });
}

/**
 * `error` in RFC 6749's shape. Anything but an OAuthError has been through the REST mapping
 * (toApiError, which logs the unknown ones): it keeps what its code tells the client to do.
 */
export function oauthErrorResponse(error: OAuthError | ApiError): Response {
  const oauth = error instanceof OAuthError ? error : oauthErrorOf(error);
  return oauthJson({ error: oauth.error, error_description: oauth.description }, oauth.status, {
    ...oauth.headers,
    ...(oauth.error === "invalid_client" && { "WWW-Authenticate": 'Basic realm="engram"' }),
  });
}

/**
 * An OAuth client acts on `error` and the status alone: a limit or an outage must read as "retry
 * after Retry-After", a refusal of this request as a 4xx it will not retry, and only a fault of the
 * server as server_error (whose details stay in the log).
 */
export function oauthErrorOf(error: ApiError): OAuthError {
  const headers = error.headers ?? {};
  switch (error.code) {
    case "rate_limited":
      return new OAuthError("temporarily_unavailable", error.message, 429, headers);
    case "unavailable":
      return new OAuthError("temporarily_unavailable", error.message, 503, headers);
    // A concurrent write collided with this one and the transaction rolled back whole: the retry succeeds.
    case "conflict":
      return new OAuthError("temporarily_unavailable", error.message, 503, { "Retry-After": "1", ...headers });
    // The grant, code or client was deleted (or ended) while the request ran.
    case "not_found":
    case "expired":
    case "revoked":
    case "used":
    case "canceled":
      return new OAuthError("invalid_grant", error.message, 400, headers);
  }
  if (error.status >= 500) return new OAuthError("server_error", "Internal error", 500);
  // Validation, a body over the limit, a content type: the request is at fault; 413 and 415 keep their meaning.
  return new OAuthError("invalid_request", error.message, error.status === 413 || error.status === 415 ? error.status : 400, headers);
}
