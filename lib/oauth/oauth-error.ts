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
 * (toApiError, which logs it): a database that cannot answer is a 503 the client retries after
 * Retry-After, as on REST, and everything else a generic 500.
 */
export function oauthErrorResponse(error: OAuthError | ApiError): Response {
  if (error instanceof OAuthError) {
    return oauthJson({ error: error.error, error_description: error.description }, error.status, {
      ...error.headers,
      ...(error.error === "invalid_client" && { "WWW-Authenticate": 'Basic realm="engram"' }),
    });
  }
  if (error.code === "unavailable") return oauthJson({ error: "temporarily_unavailable", error_description: error.message }, 503, error.headers);
  return oauthJson({ error: "server_error", error_description: "Internal error" }, 500);
}
