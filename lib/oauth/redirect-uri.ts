import { OAuthError } from "./oauth-error.ts";

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);
const FORBIDDEN_SCHEMES = new Set(["javascript:", "data:", "file:", "vbscript:", "blob:", "about:"]);
export const MAX_REDIRECT_URIS = 10;
export const MAX_URI_LENGTH = 2000;

/**
 * Spaces and control characters: in no URI or client id Engram accepts. A NUL cannot even be stored
 * in text (the insert failed as a 500), and URL() only percent-encodes the rest.
 */
export function hasSpaceOrControl(value: string): boolean {
  return /[\x00-\x20\x7f]/.test(value);
}

export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK.has(hostname);
}

/**
 * A redirect URI a client may register: https, http on a loopback host (native apps), or a
 * private-use scheme like cursor:// (RFC 8252). Never a fragment, never a script scheme.
 */
export function assertRedirectUri(raw: unknown): string {
  if (typeof raw !== "string" || raw.length === 0 || raw.length > MAX_URI_LENGTH) {
    throw new OAuthError("invalid_redirect_uri", `redirect_uris must be absolute URIs of at most ${MAX_URI_LENGTH} characters`);
  }
  if (hasSpaceOrControl(raw)) throw new OAuthError("invalid_redirect_uri", "A redirect URI must not contain spaces or control characters");
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OAuthError("invalid_redirect_uri", `Not an absolute URI: ${raw}`);
  }
  if (url.hash || raw.includes("#")) throw new OAuthError("invalid_redirect_uri", `A redirect URI must not have a fragment: ${raw}`);
  if (FORBIDDEN_SCHEMES.has(url.protocol)) throw new OAuthError("invalid_redirect_uri", `Scheme ${url.protocol} is not allowed: ${raw}`);
  if (url.protocol === "http:" && !isLoopbackHost(url.hostname)) {
    throw new OAuthError("invalid_redirect_uri", `http redirect URIs are allowed only on loopback hosts; use https: ${raw}`);
  }
  return raw;
}
