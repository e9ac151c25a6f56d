import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setLinkFetchPolicyForTests } from "@/lib/links/safe-fetch.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Client,
  StreamableHTTPClientTransport,
  UnauthorizedError,
  type OAuthClientMetadata,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
} from "@modelcontextprotocol/client";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { REFRESH_REUSE_GRACE_MS } from "@/lib/oauth/exchange-token.ts";
import { createHarness, type Client as ApiClient, type Harness } from "./support/harness.ts";
import { startAppServer } from "./support/app-server.ts";
import { routerFor } from "./support/router.ts";
import { consentAt, decode, sessionCookieFor, type Choices } from "./support/oauth-consent.ts";

// The metadata server's port, picked by the system (port 0): a fixed one failed the run whenever something else held it.
let metadataPort = 0;
const REDIRECT = "http://127.0.0.1:3599/callback";

let h: Harness;
let server: { url: string; close(): Promise<void> };
let metadataServer: Server;
let metadataHits = 0;
let ann: ApiClient;
let annCookie: string;
let teamHubId: string;

/** What a real MCP client keeps between runs: registration, PKCE verifier, tokens, where it sent the user. */
class TestOAuthProvider implements OAuthClientProvider {
  info?: StoredOAuthClientInformation;
  stored?: StoredOAuthTokens;
  verifier = "";
  authorizationUrl?: URL;
  constructor(readonly metadataUrl?: string) {}
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadataUrl() {
    return this.metadataUrl;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: "Test MCP client", redirect_uris: [REDIRECT], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: StoredOAuthClientInformation) {
    this.info = info;
  }
  tokens() {
    return this.stored;
  }
  saveTokens(tokens: StoredOAuthTokens) {
    this.stored = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  discovery?: OAuthDiscoveryState;
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

/** The user's side of the consent (tests/support/oauth-consent.ts), as Ann unless told. */
function consent(authorizationUrl: URL | string, choices: Choices = {}, cookie = annCookie): Promise<URL> {
  return consentAt(server.url, authorizationUrl, cookie, choices);
}

async function sessionCookie(userId: string): Promise<string> {
  return sessionCookieFor(h.db, userId);
}

function mcpClient(provider: OAuthClientProvider | undefined, path = "/mcp", token?: string) {
  const client = new Client({ name: "oauth-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}${path}`), {
    authProvider: provider,
    requestInit: token ? { headers: { authorization: `Bearer ${token}` } } : undefined,
  });
  return { client, transport };
}

/** The SDK client's whole dance: 401 → discovery → registration → authorize (consent) → token → connected. */
async function signInWithSdk(choices: Choices = {}, provider = new TestOAuthProvider(), path = "/mcp") {
  const first = mcpClient(provider, path);
  await expect(first.client.connect(first.transport)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.authorizationUrl).toBeDefined();
  const callback = await consent(provider.authorizationUrl!, choices);
  expect(callback.origin + callback.pathname).toBe(REDIRECT);
  expect(callback.searchParams.get("iss")).toBe(server.url);
  await first.transport.finishAuth(callback.searchParams);
  const second = mcpClient(provider, path);
  await second.client.connect(second.transport);
  return { provider, client: second.client };
}

async function token(params: Record<string, string>) {
  const res = await fetch(`${server.url}/oauth/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(params) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, string> };
}

async function mcpStatus(accessToken: string, path = "/mcp") {
  const res = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }),
  });
  return res.status;
}

/** Marks a used refresh token as used past the grace window for concurrent refreshes (REFRESH_REUSE_GRACE_MS). */
async function usedLongAgo(refreshToken: string) {
  await h.db.oAuthRefreshToken.update({ where: { tokenHash: hashSecret(refreshToken) }, data: { usedAt: new Date(Date.now() - REFRESH_REUSE_GRACE_MS - 1000) } });
}

function pkce() {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

async function register(redirectUris = [REDIRECT]): Promise<string> {
  const res = await fetch(`${server.url}/oauth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ client_name: "Manual client", redirect_uris: redirectUris }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

function authorizeUrl(clientId: string, challenge: string, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams({
    response_type: "code",
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: challenge,
    code_challenge_method: "S256",
    state: "st-1",
    resource: `${server.url}/mcp`,
    ...extra,
  });
  return `${server.url}/oauth/authorize?${params}`;
}

/** A manual client up to a fresh code. */
async function codeFor(choices: Choices = {}) {
  const clientId = await register();
  const { verifier, challenge } = pkce();
  const callback = await consent(authorizeUrl(clientId, challenge), choices);
  expect(callback.searchParams.get("state")).toBe("st-1");
  return { clientId, verifier, code: callback.searchParams.get("code")! };
}

beforeAll(async () => {
  h = await createHarness();
  server = await startAppServer();
  ann = await h.user("Ann");
  annCookie = await sessionCookie(ann.id);
  teamHubId = await h.teamHub(ann);
  // A client ID metadata document served over loopback http (allowed for loopback only with this switch).
  process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA = "1";
  metadataServer = createServer((req, res) => {
    metadataHits += 1;
    if (req.url?.includes("not-an-object")) {
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end(req.url.includes("array") ? "[]" : "null");
    }
    const id = req.url?.includes("mismatch") ? "https://someone-else.example/client.json" : `http://127.0.0.1:${metadataPort}${req.url}`;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ client_id: id, client_name: "Metadata Document Client", redirect_uris: [REDIRECT], token_endpoint_auth_method: "none" }));
  });
  await new Promise<void>((resolve) => metadataServer.listen(0, "127.0.0.1", resolve));
  metadataPort = (metadataServer.address() as AddressInfo).port;
});
afterAll(async () => {
  delete process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA;
  await new Promise<void>((resolve) => metadataServer?.close(() => resolve()));
  await server?.close();
  await h?.close();
});

describe("discovery", () => {
  it("answers an unauthenticated MCP call with 401 and resource_metadata", async () => {
    const res = await fetch(`${server.url}/mcp`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe(`Bearer resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp"`);
    const chatgpt = await fetch(`${server.url}/mcp/chatgpt`, { method: "POST", headers: { authorization: "Bearer egk_nope" }, body: "{}" });
    expect(chatgpt.status).toBe(401);
    expect(chatgpt.headers.get("www-authenticate")).toContain(`resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp/chatgpt", error="invalid_token"`);
  });

  it("a forwarded host with an impossible port falls back to the request's own origin instead of failing every request", async () => {
    const headers = { "x-forwarded-host": "engram.example:99999" };
    const metadata = await fetch(`${server.url}/.well-known/oauth-authorization-server`, { headers });
    expect(metadata.status).toBe(200);
    expect(((await metadata.json()) as { issuer: string }).issuer).toBe(server.url);
    const me = await fetch(`${server.url}/v1/auth/me`, { headers: { ...headers, authorization: `Bearer ${ann.key}` } });
    expect(me.status).toBe(200);
    const mcp = await fetch(`${server.url}/mcp`, { method: "POST", headers: { ...headers, "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
    expect(mcp.status).toBe(401);
  });

  it("publishes protected-resource (RFC 9728) and authorization-server (RFC 8414) metadata", async () => {
    for (const [path, resource] of [
      ["/.well-known/oauth-protected-resource", "/mcp"],
      ["/.well-known/oauth-protected-resource/mcp", "/mcp"],
      ["/.well-known/oauth-protected-resource/mcp/chatgpt", "/mcp/chatgpt"],
    ]) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ resource: `${server.url}${resource}`, authorization_servers: [server.url], bearer_methods_supported: ["header"] });
    }
    expect((await fetch(`${server.url}/.well-known/oauth-protected-resource/elsewhere`)).status).toBe(404);
    // Behind a proxy the metadata names the URL the client used (next start reports every request as localhost).
    const proxied = await fetch(`${server.url}/.well-known/oauth-protected-resource/mcp`, { headers: { "x-forwarded-host": "engram.example", "x-forwarded-proto": "https" } });
    expect(await proxied.json()).toMatchObject({ resource: "https://engram.example/mcp", authorization_servers: ["https://engram.example"] });
    const as = (await (await fetch(`${server.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(as).toMatchObject({
      issuer: server.url,
      authorization_endpoint: `${server.url}/oauth/authorize`,
      token_endpoint: `${server.url}/oauth/token`,
      registration_endpoint: `${server.url}/oauth/register`,
      response_types_supported: ["code"],
      grant_types_supported: ["authorization_code", "refresh_token"],
      code_challenge_methods_supported: ["S256"],
      client_id_metadata_document_supported: true,
    });
  });
});

describe("the OAuth dance, driven by the MCP SDK's client", () => {
  it("registers, signs in, consents, gets tokens and calls tools; refresh rotates; reuse revokes the grant", async () => {
    const { provider, client } = await signInWithSdk();
    expect(provider.info?.client_id).toMatch(/^ec_/);
    const pushed = await client.callTool({ name: "engram_push", arguments: { content: "OAuth-connected agents can push", hub_id: "personal" } });
    expect(pushed.isError).toBeFalsy();
    await client.close();

    const stored = await h.db.oAuthRefreshToken.findMany({ where: { grant: { clientId: provider.info!.client_id } } });
    expect(stored).toHaveLength(1);
    expect(stored[0]!.tokenHash).toBe(hashSecret(provider.stored!.refresh_token!));

    const first = provider.stored!;
    expect(first.token_type).toBe("Bearer");
    expect(first.expires_in).toBe(3600);
    const rotated = await token({ grant_type: "refresh_token", refresh_token: first.refresh_token!, client_id: provider.info!.client_id });
    expect(rotated.status).toBe(200);
    expect(rotated.headers.get("cache-control")).toBe("no-store");
    expect(rotated.body.refresh_token).not.toBe(first.refresh_token);
    expect(await mcpStatus(rotated.body.access_token!)).toBe(200);

    // The old refresh token again, past the grace window for concurrent refreshes: it leaked, so the whole grant ends, new tokens included.
    await usedLongAgo(first.refresh_token!);
    const replay = await token({ grant_type: "refresh_token", refresh_token: first.refresh_token!, client_id: provider.info!.client_id });
    expect(replay.status).toBe(400);
    expect(replay.body.error).toBe("invalid_grant");
    expect(await mcpStatus(rotated.body.access_token!)).toBe(401);
    expect(await mcpStatus(first.access_token)).toBe(401);
    const again = await token({ grant_type: "refresh_token", refresh_token: rotated.body.refresh_token!, client_id: provider.info!.client_id });
    expect(again.body.error).toBe("invalid_grant");
  });

  it("lists grants on the API and revoking one ends its tokens at once", async () => {
    const { provider, client } = await signInWithSdk({ hubs: [teamHubId], access: "read" });
    await client.close();
    // A second connected app, so the list has pages to walk.
    await (await signInWithSdk({ hubs: [teamHubId], access: "read" })).client.close();
    const listed = await ann.get("/v1/auth/oauth-grants");
    expect(listed.status).toBe(200);
    const grant = listed.body.data.grants.find((g: { client_id: string }) => g.client_id === provider.info!.client_id);
    expect(grant).toMatchObject({ client_name: "Test MCP client", hub_ids: [teamHubId], all_hubs: false, scopes: ["read"], resource: `${server.url}/mcp` });
    // Paginated like every list: one grant a page walks the same grants, newest first.
    const all = listed.body.data.grants.map((g: { id: string }) => g.id);
    expect(all.length).toBeGreaterThan(1);
    expect(listed.body.data).toMatchObject({ has_more: false, next_cursor: "" });
    const walked: string[] = [];
    for (let cursor = "", pages = 0; pages === 0 || cursor; pages++) {
      const res = await ann.get(`/v1/auth/oauth-grants?limit=1${cursor ? `&cursor=${cursor}` : ""}`);
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.grants).toHaveLength(1);
      walked.push(res.body.data.grants[0].id);
      expect(res.body.data.has_more).toBe(walked.length < all.length);
      cursor = res.body.data.next_cursor;
    }
    expect(walked).toEqual(all);
    expect(await mcpStatus(provider.stored!.access_token)).toBe(200);
    expect((await ann.delete(`/v1/auth/oauth-grants/${grant.id}`)).body.data).toEqual({ id: grant.id, revoked: true });
    expect(await mcpStatus(provider.stored!.access_token)).toBe(401);
    expect((await ann.delete(`/v1/auth/oauth-grants/${grant.id}`)).status).toBe(404);
    const other = await h.user("Other");
    expect((await other.delete(`/v1/auth/oauth-grants/${grant.id}`)).status).toBe(404);
  });

  it("a grant reaches only the hubs picked, read-only when so chosen", async () => {
    const tag = randomBytes(4).toString("hex");
    expect((await ann.post("/v1/memories", { content: `personal secret ${tag} glacier` })).status).toBe(201);
    expect((await ann.post("/v1/memories", { content: `team note ${tag} glacier` }, { headers: { "x-hub-id": teamHubId } })).status).toBe(201);
    const { client } = await signInWithSdk({ hubs: [teamHubId], access: "read" });
    const hubs = await client.callTool({ name: "engram_hubs", arguments: {} });
    expect((hubs.structuredContent as { hubs: { hub: { id: string } }[] }).hubs.map((x) => x.hub.id)).toEqual([teamHubId]);
    const push = await client.callTool({ name: "engram_push", arguments: { content: "nope", hub_id: teamHubId } });
    expect(push.isError).toBe(true);
    expect(JSON.stringify(push.content)).toContain("read-only");
    const personal = await client.callTool({ name: "engram_list", arguments: { hub_id: "personal" } });
    expect(personal.isError).toBe(true);
    const listed = await client.callTool({ name: "engram_list", arguments: {} });
    const ids = (listed.structuredContent as { memories: { hub_id: string }[] }).memories.map((m) => m.hub_id);
    expect(ids.length).toBeGreaterThan(0);
    expect(new Set(ids)).toEqual(new Set([teamHubId]));
    const personalMemory = (await ann.get(`/v1/memories?hub_id=${ann.personalHubId}`)).body.data.memories[0];
    const get = await client.callTool({ name: "engram_get", arguments: { id: personalMemory.id } });
    expect(get.isError).toBe(true);
    expect(JSON.stringify(get.content)).toContain("not_found");
    await client.close();
  });

  // The SDK client only sends https metadata URLs, so this one drives the same endpoints by hand over loopback http.
  it("works with a client ID metadata document instead of registration", async () => {
    const clientId = `http://127.0.0.1:${metadataPort}/client.json`;
    const { verifier, challenge } = pkce();
    const callback = await consent(authorizeUrl(clientId, challenge));
    const tokens = await token({ grant_type: "authorization_code", code: callback.searchParams.get("code")!, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT });
    expect(tokens.status).toBe(200);
    expect(await mcpStatus(tokens.body.access_token!)).toBe(200);
    const stored = await h.db.oAuthClient.findUniqueOrThrow({ where: { id: clientId } });
    expect(stored).toMatchObject({ kind: "metadata_document", name: "Metadata Document Client", redirectUris: [REDIRECT] });
    // A document whose client_id is not its own URL is refused.
    const wrong = await fetch(authorizeUrl(`http://127.0.0.1:${metadataPort}/other.json?mismatch=1`, challenge), { redirect: "manual" });
    expect(wrong.status).toBe(400);
    // JSON that is not an object is a bad document, shown to the person, never a server error.
    for (const path of ["not-an-object.json", "not-an-object-array.json"]) {
      const res = await fetch(authorizeUrl(`http://127.0.0.1:${metadataPort}/${path}`, challenge), { redirect: "manual" });
      expect(res.status, path).toBe(400);
      expect(await res.text()).toContain("invalid_client");
      const exchange = await token({ grant_type: "authorization_code", code: "x", client_id: `http://127.0.0.1:${metadataPort}/${path}`, code_verifier: "v".repeat(43) });
      expect([exchange.status, exchange.body.error]).toEqual([401, "invalid_client"]);
    }
  });

  it("a client_id naming an internal address is refused without the server fetching it", async () => {
    const { challenge } = pkce();
    setLinkFetchPolicyForTests({ resolve: async () => [{ address: "10.0.0.5", family: 4 }] });
    try {
      const before = metadataHits;
      for (const clientId of [
        `https://127.0.0.1:${metadataPort}/client.json`, // https to loopback: the http switch does not cover it
        "https://[::1]/client.json",
        "https://169.254.169.254/latest/meta-data",
        "https://intranet.example/client.json", // resolves to 10.0.0.5
      ]) {
        const res = await fetch(authorizeUrl(clientId, challenge), { redirect: "manual" });
        const text = await res.text();
        expect([clientId, res.status], text.slice(0, 300)).toEqual([clientId, 400]);
        expect(text).toMatch(/private, loopback or link-local/);
        const exchange = await token({ grant_type: "authorization_code", code: "x", client_id: clientId, code_verifier: "v".repeat(43), redirect_uri: REDIRECT });
        expect(exchange.body.error, clientId).toBe("invalid_client");
      }
      expect(metadataHits).toBe(before);
    } finally {
      setLinkFetchPolicyForTests(undefined);
    }
  });

  it("signs in to /mcp/chatgpt with a token bound to that resource only", async () => {
    const { provider, client } = await signInWithSdk({}, new TestOAuthProvider(), "/mcp/chatgpt");
    expect((await client.listTools()).tools.map((t) => t.name)).toContain("search");
    await client.close();
    expect(await mcpStatus(provider.stored!.access_token, "/mcp/chatgpt")).toBe(200);
    expect(await mcpStatus(provider.stored!.access_token, "/mcp")).toBe(401);
  });
});

describe("single use under concurrency", () => {
  it("a code redeemed five times at once gives one token pair, which the replays then revoke (RFC 6749 §4.1.2)", async () => {
    const { code, clientId, verifier } = await codeFor();
    const exchanges = await Promise.all(
      Array.from({ length: 5 }, () => token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT })),
    );
    expect(exchanges.map((r) => r.status).sort()).toEqual([200, 400, 400, 400, 400]);
    expect(exchanges.filter((r) => r.status === 400).every((r) => r.body.error === "invalid_grant")).toBe(true);
    const pair = exchanges.find((r) => r.status === 200)!.body;
    expect(await mcpStatus(pair.access_token!)).toBe(401);
    expect((await token({ grant_type: "refresh_token", refresh_token: pair.refresh_token!, client_id: clientId })).body.error).toBe("invalid_grant");
  });

  it("a refresh token used five times at once rotates once; the others are refused but the grant lives (concurrent clients, not a leak)", async () => {
    const { code, clientId, verifier } = await codeFor();
    const pair = (await token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT })).body;
    const rotations = await Promise.all(Array.from({ length: 5 }, () => token({ grant_type: "refresh_token", refresh_token: pair.refresh_token!, client_id: clientId })));
    expect(rotations.map((r) => r.status).sort()).toEqual([200, 400, 400, 400, 400]);
    expect(rotations.filter((r) => r.status === 400).every((r) => r.body.error === "invalid_grant")).toBe(true);
    const rotated = rotations.find((r) => r.status === 200)!.body;
    expect(await mcpStatus(rotated.access_token!)).toBe(200);
    expect(await mcpStatus(pair.access_token!)).toBe(200);
    // Again within the window: still refused, still no revocation.
    expect((await token({ grant_type: "refresh_token", refresh_token: pair.refresh_token!, client_id: clientId })).body.error).toBe("invalid_grant");
    expect((await h.db.oAuthGrant.findFirstOrThrow({ where: { clientId } })).revokedAt).toBeNull();
    const next = await token({ grant_type: "refresh_token", refresh_token: rotated.refresh_token!, client_id: clientId });
    expect(next.status).toBe(200);
    expect(await mcpStatus(next.body.access_token!)).toBe(200);
  });

  it("a used refresh token replayed after the grace window ends the grant, the new tokens included", async () => {
    const { code, clientId, verifier } = await codeFor();
    const pair = (await token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT })).body;
    const rotated = (await token({ grant_type: "refresh_token", refresh_token: pair.refresh_token!, client_id: clientId })).body;
    expect(await mcpStatus(rotated.access_token!)).toBe(200);
    await usedLongAgo(pair.refresh_token!);
    const replay = await token({ grant_type: "refresh_token", refresh_token: pair.refresh_token!, client_id: clientId });
    expect([replay.status, replay.body.error]).toEqual([400, "invalid_grant"]);
    expect(await mcpStatus(rotated.access_token!)).toBe(401);
    expect((await token({ grant_type: "refresh_token", refresh_token: rotated.refresh_token!, client_id: clientId })).body.error).toBe("invalid_grant");
    expect((await h.db.oAuthGrant.findFirstOrThrow({ where: { clientId } })).revokedReason).toBe("refresh_token_reuse");
  });
});

describe("negative cases", () => {
  it("an access token also works on REST (this server's audience; decisions.md: every endpoint), tampered ones nowhere", async () => {
    const { code, clientId, verifier } = await codeFor();
    const tokens = await token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT });
    expect(tokens.status).toBe(200);
    const me = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${tokens.body.access_token}` } });
    expect(me.status).toBe(200);
    // Tampered tokens fail too.
    const tampered = `${tokens.body.access_token!.slice(0, -3)}AAA`;
    expect(await mcpStatus(tampered)).toBe(401);
    expect((await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${tampered}` } })).status).toBe(401);
  });

  it("a refresh refused for its resource or scope keeps the token: the corrected retry rotates, the grant lives", async () => {
    const { code, clientId, verifier } = await codeFor({ access: "read" });
    const pair = (await token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT })).body;
    const wrongResource = await token({ grant_type: "refresh_token", refresh_token: pair.refresh_token!, client_id: clientId, resource: `${server.url}/mcp/chatgpt` });
    expect(wrongResource.body.error).toBe("invalid_target");
    const wider = await token({ grant_type: "refresh_token", refresh_token: pair.refresh_token!, client_id: clientId, scope: "read write" });
    expect(wider.body.error).toBe("invalid_scope");
    const retried = await token({ grant_type: "refresh_token", refresh_token: pair.refresh_token!, client_id: clientId, resource: `${server.url}/mcp` });
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(await mcpStatus(retried.body.access_token!)).toBe(200);
    expect((await h.db.oAuthGrant.findFirstOrThrow({ where: { clientId } })).revokedAt).toBeNull();
  });

  it("a refresh asking for a narrower scope gets an access token of that scope; the grant and its next refresh keep the whole", async () => {
    const { code, clientId, verifier } = await codeFor({ access: "write" });
    const pair = (await token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT })).body;
    expect(pair.scope).toBe("read write");
    const narrowed = await token({ grant_type: "refresh_token", refresh_token: pair.refresh_token!, client_id: clientId, scope: "read" });
    expect(narrowed.status, JSON.stringify(narrowed.body)).toBe(200);
    expect(narrowed.body.scope).toBe("read");
    const bearer = { authorization: `Bearer ${narrowed.body.access_token}`, "content-type": "application/json" };
    expect((await fetch(`${server.url}/v1/auth/me`, { headers: bearer })).status).toBe(200);
    const write = await fetch(`${server.url}/v1/memories`, { method: "POST", headers: bearer, body: JSON.stringify({ content: "# Narrowed\n\nA read token cannot write." }) });
    expect(write.status).toBe(403);
    // RFC 6749 §6: the new refresh token keeps the grant's scope, so the next refresh may ask for all of it again.
    const whole = await token({ grant_type: "refresh_token", refresh_token: narrowed.body.refresh_token!, client_id: clientId });
    expect(whole.body.scope).toBe("read write");
    const wrote = await fetch(`${server.url}/v1/memories`, {
      method: "POST",
      headers: { authorization: `Bearer ${whole.body.access_token}`, "content-type": "application/json" },
      body: JSON.stringify({ content: "# Whole\n\nThe full scope writes again." }),
    });
    expect(wrote.status).toBe(201);
  });

  it("refuses a wrong code_verifier", async () => {
    const { code, clientId } = await codeFor();
    const res = await token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: pkce().verifier, redirect_uri: REDIRECT });
    expect(res.status).toBe(400);
    expect(res.body.error).toBe("invalid_grant");
  });

  it("a code works once; reusing it revokes what it gave", async () => {
    const { code, clientId, verifier } = await codeFor();
    const ok = await token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT });
    expect(ok.status).toBe(200);
    expect(await mcpStatus(ok.body.access_token!)).toBe(200);
    const again = await token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT });
    expect(again.body.error).toBe("invalid_grant");
    expect(await mcpStatus(ok.body.access_token!)).toBe(401);
  });

  it("an expired code (5 minutes) is refused", async () => {
    const { code, clientId, verifier } = await codeFor();
    const row = await h.db.oAuthCode.findUniqueOrThrow({ where: { codeHash: hashSecret(code) } });
    expect(row.expiresAt.getTime() - Date.now()).toBeGreaterThan(4 * 60_000);
    expect(row.expiresAt.getTime() - Date.now()).toBeLessThanOrEqual(5 * 60_000);
    await h.db.oAuthCode.update({ where: { codeHash: row.codeHash }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const res = await token({ grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT });
    expect(res.body).toMatchObject({ error: "invalid_grant" });
  });

  it("a foreign redirect URI is never redirected to", async () => {
    const clientId = await register();
    const { challenge } = pkce();
    for (const foreign of ["https://evil.example/callback", `${REDIRECT}/extra`, "http://127.0.0.1:3599/callback?x=1", "http://127.0.0.1:3598/callback"]) {
      const res = await fetch(authorizeUrl(clientId, challenge, { redirect_uri: foreign }), { headers: { cookie: annCookie }, redirect: "manual" });
      expect(res.status, foreign).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.text()).toContain("redirect_uri does not match");
    }
    // And the token endpoint refuses a different redirect_uri than the code's.
    const { code, clientId: c2, verifier } = await codeFor();
    const res = await token({ grant_type: "authorization_code", code, client_id: c2, code_verifier: verifier, redirect_uri: "https://evil.example/callback" });
    expect(res.body.error).toBe("invalid_grant");
  });

  it("a mismatched resource is refused at authorize and at the token endpoint", async () => {
    const clientId = await register();
    const { challenge } = pkce();
    const res = await fetch(authorizeUrl(clientId, challenge, { resource: "https://other.example/mcp" }), { headers: { cookie: annCookie }, redirect: "manual" });
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(location.searchParams.get("error")).toBe("invalid_target");
    expect(location.searchParams.get("state")).toBe("st-1");
    const { code, clientId: c2, verifier } = await codeFor();
    const exchanged = await token({ grant_type: "authorization_code", code, client_id: c2, code_verifier: verifier, redirect_uri: REDIRECT, resource: `${server.url}/mcp/chatgpt` });
    expect(exchanged.body.error).toBe("invalid_target");
  });

  it("refuses plain PKCE, missing PKCE and other response types with redirected errors", async () => {
    const clientId = await register();
    const { challenge } = pkce();
    for (const [extra, error] of [
      [{ code_challenge_method: "plain" }, "invalid_request"],
      [{ code_challenge: "" }, "invalid_request"],
      [{ response_type: "token" }, "unsupported_response_type"],
    ] as const) {
      const res = await fetch(authorizeUrl(clientId, challenge, extra), { redirect: "manual" });
      expect(res.status).toBe(302);
      expect(new URL(res.headers.get("location")!).searchParams.get("error")).toBe(error);
    }
  });

  it("deny sends access_denied back to the client", async () => {
    const clientId = await register();
    const callback = await consent(authorizeUrl(clientId, pkce().challenge), { decision: "deny" });
    expect(callback.searchParams.get("error")).toBe("access_denied");
    expect(callback.searchParams.get("code")).toBeNull();
  });

  it("the consent form refuses cross-site posts and forged CSRF tokens", async () => {
    const clientId = await register();
    const page = await fetch(authorizeUrl(clientId, pkce().challenge), { headers: { cookie: annCookie } });
    const html = await page.text();
    const form = new URLSearchParams();
    for (const [, name, value] of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form.append(name!, decode(value!));
    form.set("decision", "allow");
    form.set("hubs", "all");
    const post = (headers: Record<string, string>, body = form) =>
      fetch(`${server.url}/oauth/authorize`, { method: "POST", headers: { cookie: annCookie, "content-type": "application/x-www-form-urlencoded", ...headers }, body, redirect: "manual" });
    expect((await post({ origin: "https://evil.example" })).status).toBe(403);
    expect((await post({ "sec-fetch-site": "cross-site" })).status).toBe(403);
    const forged = new URLSearchParams(form);
    forged.set("csrf", `${Date.now()}.AAAA`);
    expect((await post({ origin: server.url }, forged)).status).toBe(403);
    // Someone else's session cannot use Ann's form.
    const bob = await h.user("Bob");
    const bobPost = await fetch(`${server.url}/oauth/authorize`, {
      method: "POST",
      headers: { cookie: await sessionCookie(bob.id), "content-type": "application/x-www-form-urlencoded", origin: server.url },
      body: form,
      redirect: "manual",
    });
    expect(bobPost.status).toBe(403);
    expect((await post({ origin: server.url })).status).toBe(303);
  });

  it("registration validates redirect URIs and token errors follow RFC 6749", async () => {
    const bad = async (redirect_uris: unknown) => {
      const res = await fetch(`${server.url}/oauth/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ redirect_uris }) });
      return { status: res.status, body: (await res.json()) as { error: string } };
    };
    for (const uris of [[], ["http://evil.example/cb"], ["javascript:alert(1)"], ["https://x.example/cb#frag"], "nope"]) {
      const res = await bad(uris);
      expect(res.status, JSON.stringify(uris)).toBe(400);
      expect(res.body.error).toBe("invalid_redirect_uri");
    }
    expect((await bad(["cursor://anysphere.cursor-mcp/oauth/callback"])).status).toBe(201);
    expect((await token({ grant_type: "password", username: "a", password: "b" })).body.error).toBe("unsupported_grant_type");
    expect((await token({ grant_type: "authorization_code", client_id: "ec_unknown", code: "x", code_verifier: pkce().verifier })).body.error).toBe("invalid_client");
    expect((await token({ grant_type: "authorization_code" })).body.error).toBe("invalid_request");
    expect((await token({ grant_type: "refresh_token", refresh_token: "ert_nope", client_id: "x" })).body.error).toBe("invalid_grant");
  });
});

describe("request bounds", () => {
  it("refuses an endless body at each OAuth form endpoint after reading a bounded part of it, not after buffering it whole", async () => {
    const dispatch = routerFor(["oauth"]);
    const chunk = new Uint8Array(64 * 1024).fill(0x61);
    for (const [path, type] of [
      ["/oauth/register", "application/json"],
      ["/oauth/token", "application/x-www-form-urlencoded"],
      ["/oauth/revoke", "application/x-www-form-urlencoded"],
      ["/oauth/authorize", "application/x-www-form-urlencoded"],
    ] as const) {
      let pulled = 0;
      // 64 MiB sent without Content-Length: only a streamed cap stops early.
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (pulled >= 64 * 1024 * 1024) return controller.close();
          pulled += chunk.byteLength;
          controller.enqueue(chunk);
        },
      });
      const req = new Request(`${server.url}${path}`, { method: "POST", headers: { "content-type": type, cookie: annCookie, origin: server.url }, body, duplex: "half" } as RequestInit);
      const res = await dispatch(req);
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.status, path).toBeLessThan(500);
      expect(pulled, path).toBeLessThanOrEqual(1024 * 1024);
    }
  });
});
