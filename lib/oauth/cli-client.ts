import { ApiError } from "@/lib/api/errors.ts";
import type { Db } from "@/lib/db/database.ts";
import { GrantError } from "./exchange-token.ts";
import { hasSpaceOrControl, isLoopbackHost } from "./redirect-uri.ts";

/**
 * The built-in OAuth client behind `memax login`. Memax's CLI registers nothing and sends no
 * PKCE: it opens `/v1/auth/<provider>?redirect_uri=http://localhost:<port>/callback`, receives a
 * code on that port and trades it at `POST /v1/auth/exchange`. So this one client accepts any
 * loopback redirect (the port changes per login, RFC 8252 §7.3) and codes without a challenge,
 * which only `/v1/auth/exchange` redeems.
 */
export const CLI_CLIENT_ID = "memax-cli";
export const CLI_CLIENT_KIND = "builtin";
const CLI_CLIENT_NAME = "Memax CLI";

/** An http URI on a loopback host with a path and no fragment, credentials, spaces or control characters: where the CLI listens. */
export function isCliRedirectUri(raw: string): boolean {
  // The raw string is what the code stores, and text holds no NUL: URL would only percent-encode it.
  if (raw.length > 2000 || hasSpaceOrControl(raw)) return false;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return false;
  }
  return url.protocol === "http:" && isLoopbackHost(url.hostname) && !url.hash && !raw.includes("#") && !url.username && !url.password;
}

/**
 * The client row grants point at; created on the first CLI sign-in. An insert that skips a row
 * already there (ON CONFLICT DO NOTHING): an upsert reads, then inserts, so first sign-ins at once
 * each found none and all but one hit the primary key (a 409).
 */
export async function ensureCliClient(db: Db): Promise<void> {
  await db.oAuthClient.createMany({ data: [{ id: CLI_CLIENT_ID, name: CLI_CLIENT_NAME, redirectUris: [], kind: CLI_CLIENT_KIND }], skipDuplicates: true });
}

const FAILURE_CODE = { invalid: "unauthorized", used: "used", expired: "expired", revoked: "revoked" } as const;

/** A refused code or refresh token, in the REST envelope: 401 when unknown, 410 when used, expired or revoked. */
export async function asCliGrantError<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof GrantError) throw new ApiError(FAILURE_CODE[error.reason], error.description);
    throw error;
  }
}
