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
  ) {
    super(description);
    this.name = "OAuthError";
  }
}

export function oauthJson(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return Response.json(body, { status, headers: { "Cache-Control": "no-store", Pragma: "no-cache", ...headers } });
}

export function oauthErrorResponse(error: unknown, requestId?: string): Response {
  if (error instanceof OAuthError) {
    return oauthJson({ error: error.error, error_description: error.description }, error.status, error.error === "invalid_client" ? { "WWW-Authenticate": 'Basic realm="engram"' } : {});
  }
  console.error(`[${requestId ?? "oauth"}] unhandled OAuth error`, error);
  return oauthJson({ error: "server_error", error_description: "Internal error" }, 500);
}
