import { wellFormed } from "@/lib/api/parse.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { Db } from "@/lib/db/database.ts";
import { currentFetchPolicy, LinkFetchError, safeFetch } from "@/lib/links/safe-fetch.ts";
import { OAuthError } from "./oauth-error.ts";
import { assertRoomForNewClient, cleanClientName, cleanClientUri } from "./register-client.ts";
import { MAX_REDIRECT_URIS, assertRedirectUri, hasSpaceOrControl, isLoopbackHost } from "./redirect-uri.ts";

export interface OAuthClientInfo {
  id: string;
  name: string;
  redirectUris: string[];
  kind: string;
  clientUri: string | null;
}

/** Client ID metadata documents are re-read at most this often. */
const METADATA_TTL_MS = 24 * 60 * 60 * 1000;
const METADATA_TIMEOUT_MS = 5000;
const METADATA_MAX_BYTES = 64 * 1024;

/** A client_id that is a URL names a client ID metadata document. */
export function isMetadataDocumentId(clientId: string): boolean {
  return /^https?:\/\//i.test(clientId);
}

/**
 * The client behind a client_id: a registered one (RFC 7591), or the client ID metadata
 * document at that https URL, fetched and cached. Unknown → invalid_client.
 */
export async function findClient(db: Db, clientId: string | null | undefined, now: Date, origin?: string): Promise<OAuthClientInfo> {
  if (!clientId || clientId.length > 2000) throw new OAuthError("invalid_request", "client_id is required");
  // No client's id holds one (registered ids are base64url, document URLs are refused with them), and a NUL cannot even be looked up.
  if (hasSpaceOrControl(clientId)) throw new OAuthError("invalid_client", "Unknown client_id: it contains spaces or control characters");
  const stored = await db.oAuthClient.findUnique({ where: { id: clientId } });
  if (!isMetadataDocumentId(clientId)) {
    if (!stored) throw new OAuthError("invalid_client", "Unknown client_id: register the client first");
    return stored;
  }
  if (stored && stored.fetchedAt && now.getTime() - stored.fetchedAt.getTime() < METADATA_TTL_MS) return stored;
  // Past the cap, a new URL is refused before it is fetched: otherwise each request still costs an outbound read. Checked again under the lock below.
  if (!stored) await assertRoomForNewClient(db, "metadata_document", now, origin);
  const doc = await fetchMetadataDocument(clientId, !!stored);
  const data = { name: doc.name, redirectUris: doc.redirectUris, kind: "metadata_document", clientUri: doc.clientUri, fetchedAt: now };
  return db.$transaction(async (tx) => {
    // Anyone can name a new URL on every request: new document clients are capped like registrations.
    await lockForTransaction(tx, "oauth-register");
    if (!(await tx.oAuthClient.findUnique({ where: { id: clientId }, select: { id: true } }))) await assertRoomForNewClient(tx, "metadata_document", now, origin);
    return tx.oAuthClient.upsert({ where: { id: clientId }, create: { id: clientId, ...data, createdAt: now, createdFrom: origin ?? null }, update: data });
  });
}

function assertMetadataUrl(clientId: string): URL {
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    throw new OAuthError("invalid_client", "client_id is not a valid URL");
  }
  // Plain http only for loopback documents, and only when the operator allows it (local development and tests).
  const insecureOk = url.protocol === "http:" && isLoopbackHost(url.hostname) && process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA === "1";
  if ((url.protocol !== "https:" && !insecureOk) || url.pathname === "/" || url.hash || url.username || url.password) {
    throw new OAuthError("invalid_client", "A client ID metadata document URL must be https with a path, no fragment and no credentials");
  }
  return url;
}

async function fetchMetadataDocument(clientId: string, known: boolean): Promise<{ name: string; redirectUris: string[]; clientUri: string | null }> {
  const url = assertMetadataUrl(clientId);
  let text: string;
  try {
    // Anyone can name any URL as a client_id, signed in or not: the document is read the way a link
    // is (lib/links/safe-fetch.ts) — only public addresses, the connection pinned to the address
    // checked, no redirects — so a client_id cannot make the server probe internal hosts.
    const port = url.port || (url.protocol === "https:" ? "443" : "80");
    const loopback = url.protocol === "http:" ? ["127.0.0.1", "::1"].map((address) => `${address}:${port}`) : [];
    const page = await safeFetch(url.toString(), {
      ...currentFetchPolicy(),
      maxRedirects: 0,
      timeoutMs: METADATA_TIMEOUT_MS,
      maxBytes: METADATA_MAX_BYTES,
      // assertMetadataUrl let plain http through only for a loopback document the operator allowed.
      allow: [...currentFetchPolicy().allow, ...loopback],
    });
    text = page.body.toString("utf8");
  } catch (error) {
    const reason = error instanceof LinkFetchError ? error.message : "it could not be read";
    // A client read before whose document's server is failing now (down, slow, a 5xx) is an outage
    // to retry, not an unknown client: refused as one, the consent request answered 404 and the page
    // "not valid". Anything else means no such client: a document gone (a 4xx), moved (a redirect),
    // grown past the bound, a domain that no longer resolves, an address refused. Answered as an
    // outage, an app that moved its document or let its domain lapse was told "try again" forever.
    const outage = known && (!(error instanceof LinkFetchError) || error.failingNow);
    if (outage) throw new OAuthError("temporarily_unavailable", `The app's client ID metadata document could not be fetched again (${reason}); try again later`, 503, { "Retry-After": "30" });
    throw new OAuthError("invalid_client", `Could not fetch the client ID metadata document: ${reason}`);
  }
  let parsed: unknown;
  try {
    // Half a surrogate pair ("\ud800") reads as U+FFFD: stored as it was, it failed in the database (500).
    parsed = wellFormed(JSON.parse(text));
  } catch {
    throw new OAuthError("invalid_client", "The client ID metadata document is not JSON");
  }
  // Whoever names the URL controls the document: `null` or an array must be refused, not read into.
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new OAuthError("invalid_client", "The client ID metadata document must be a JSON object");
  const doc = parsed as Record<string, unknown>;
  if (doc.client_id !== clientId) throw new OAuthError("invalid_client", "The metadata document's client_id does not match its URL");
  const uris = doc.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > MAX_REDIRECT_URIS) {
    throw new OAuthError("invalid_client", `The metadata document needs 1 to ${MAX_REDIRECT_URIS} redirect_uris`);
  }
  let redirectUris: string[];
  try {
    redirectUris = uris.map(assertRedirectUri);
  } catch (error) {
    throw new OAuthError("invalid_client", `The metadata document has a bad redirect URI: ${(error as Error).message}`);
  }
  const method = doc.token_endpoint_auth_method;
  if (method !== undefined && method !== "none") throw new OAuthError("invalid_client", "Only public clients (token_endpoint_auth_method none) are supported");
  // Cleaned as at registration: whoever controls the document controls these strings.
  return { name: cleanClientName(doc.client_name, url.host), redirectUris: [...new Set(redirectUris)], clientUri: cleanClientUri(doc.client_uri) };
}
