import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { REFRESH_REUSE_GRACE_MS } from "@/lib/oauth/exchange-token.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { startAppServer } from "./support/app-server.ts";
import { consentAt, sessionCookieFor, type Choices } from "./support/oauth-consent.ts";

// `memax login`: the browser leg (/v1/auth/<provider> → sign-in → consent → code to the CLI's
// loopback port) and the CLI's two JSON calls, /v1/auth/exchange and /v1/auth/refresh, over HTTP.
const CALLBACK = "http://127.0.0.1:3597/callback";

let h: Harness;
let server: { url: string; close(): Promise<void> };
let ann: Client;
let annCookie: string;

beforeAll(async () => {
  h = await createHarness();
  server = await startAppServer();
  ann = await h.user("Ann");
  annCookie = await sessionCookieFor(h.db, ann.id);
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

interface Reply {
  status: number;
  body: { data?: Record<string, unknown>; error?: { code: string; message: string } };
}

async function call(method: string, path: string, body?: unknown, token?: string): Promise<Reply> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { "content-type": "application/json", ...(token && { authorization: `Bearer ${token}` }) },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Reply["body"] };
}

/** Where `memax login` opens the browser, up to the authorization request it redirects to. */
async function start(provider = "github", redirectUri = CALLBACK, extra: Record<string, string> = {}): Promise<URL> {
  const res = await fetch(`${server.url}/v1/auth/${provider}?${new URLSearchParams({ redirect_uri: redirectUri, ...extra })}`, { redirect: "manual" });
  expect(res.status).toBe(302);
  const next = new URL(res.headers.get("location")!, server.url);
  expect(next.pathname).toBe("/oauth/authorize");
  return next;
}

async function codeFor(choices: Choices = {}, provider = "github"): Promise<string> {
  const callback = await consentAt(server.url, await start(provider), annCookie, choices);
  expect(callback.origin + callback.pathname).toBe(CALLBACK);
  expect(callback.searchParams.get("iss")).toBe(server.url);
  return callback.searchParams.get("code")!;
}

async function tokensFor(choices: Choices = {}) {
  const res = await call("POST", "/v1/auth/exchange", { code: await codeFor(choices) });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { access_token: string; refresh_token: string; expires_in: number };
}

describe("the browser leg", () => {
  it("sends the browser through sign-in to a consent page for the Memax CLI, then a code to the CLI's port", async () => {
    const authorize = await start("github", CALLBACK, { state: "s-42" });
    expect(Object.fromEntries(authorize.searchParams)).toEqual({ response_type: "code", client_id: "memax-cli", redirect_uri: CALLBACK, scope: "read write", state: "s-42" });
    const page = await fetch(authorize, { headers: { cookie: annCookie } });
    const html = await page.text();
    expect(html).toContain("Connect Memax CLI to Engram?");
    expect(html).toContain("create and revoke API keys");
    const callback = await consentAt(server.url, authorize, annCookie);
    expect(callback.searchParams.get("state")).toBe("s-42");
    expect(callback.searchParams.get("code")).toMatch(/^eac_/);
  });

  it("takes --provider google the same way", async () => {
    const authorize = await start("google");
    expect(authorize.searchParams.get("client_id")).toBe("memax-cli");
  });

  it("refuses a redirect that is not the CLI's loopback address, to the person, without redirecting", async () => {
    for (const bad of ["https://evil.example/callback", "http://evil.example/callback", "http://127.0.0.1:3597/callback#x", "http://user:pw@localhost:3597/cb", "not a url"]) {
      const res = await fetch(`${server.url}/v1/auth/github?${new URLSearchParams({ redirect_uri: bad })}`, { redirect: "manual" });
      expect(res.status, bad).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.json()).toMatchObject({ error: { code: "invalid_request", message: expect.stringContaining("localhost or 127.0.0.1") } });
    }
    const missing = await fetch(`${server.url}/v1/auth/github`, { redirect: "manual" });
    expect(missing.status).toBe(400);
    // The authorization endpoint applies the same rule when called directly with the CLI's client id.
    const direct = await fetch(`${server.url}/oauth/authorize?${new URLSearchParams({ response_type: "code", client_id: "memax-cli", redirect_uri: "https://evil.example/cb" })}`, {
      headers: { cookie: annCookie },
      redirect: "manual",
    });
    expect(direct.status).toBe(400);
    expect(direct.headers.get("location")).toBeNull();
  });

  it("refuses a loopback redirect holding a NUL, a space or another control character (a NUL made the consent a 500)", async () => {
    for (const bad of ["http://127.0.0.1:3597/call\u0000back", "http://127.0.0.1:3597/call back", "http://127.0.0.1:3597/cb\u0007"]) {
      const res = await fetch(`${server.url}/v1/auth/github?${new URLSearchParams({ redirect_uri: bad })}`, { redirect: "manual" });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      const authorize = new URL(`${server.url}/oauth/authorize?${new URLSearchParams({ response_type: "code", client_id: "memax-cli", redirect_uri: bad })}`);
      const page = await fetch(authorize, { headers: { cookie: annCookie }, redirect: "manual" });
      expect([page.status, page.headers.get("location")], JSON.stringify(bad)).toEqual([400, null]);
    }
  });

  it("sends a denial back to the CLI as access_denied", async () => {
    const callback = await consentAt(server.url, await start(), annCookie, { decision: "deny" });
    expect(callback.searchParams.get("error")).toBe("access_denied");
    expect(callback.searchParams.get("code")).toBeNull();
  });
});

describe("POST /v1/auth/exchange", () => {
  it("trades the code for tokens that work on the REST API, and for key management", async () => {
    const tokens = await tokensFor();
    expect(tokens).toMatchObject({ access_token: expect.stringMatching(/^eat_/), refresh_token: expect.stringMatching(/^ert_/), expires_in: 3600, token_type: "Bearer", scope: "read write" });
    const me = await call("GET", "/v1/auth/me", undefined, tokens.access_token);
    expect(me.status).toBe(200);
    expect(me.body.data).toMatchObject({ user: { id: ann.id } });
    const pushed = await call("POST", "/v1/memories", { content: "pushed with the CLI's sign-in" }, tokens.access_token);
    expect(pushed.status).toBe(201);
    // `memax auth create-key` and `memax setup` create agent keys with this token.
    const key = await call("POST", "/v1/auth/api-keys", { name: "claude-code", agent_name: "claude-code" }, tokens.access_token);
    expect(key.status, JSON.stringify(key.body)).toBe(201);
    const listed = await call("GET", "/v1/auth/api-keys", undefined, tokens.access_token);
    expect(listed.status).toBe(200);
    const revoked = await call("DELETE", `/v1/auth/api-keys/${key.body.data!.id as string}`, undefined, tokens.access_token);
    expect(revoked.body.data).toMatchObject({ revoked: true });
    // The sign-in is listed among the connected apps, under the CLI's name.
    const grants = await call("GET", "/v1/auth/oauth-grants", undefined, tokens.access_token);
    expect(JSON.stringify(grants.body.data)).toContain("Memax CLI");
  });

  it("redeems a code once: a replay answers 410 used and ends the tokens the first exchange gave", async () => {
    const code = await codeFor();
    const first = await call("POST", "/v1/auth/exchange", { code });
    expect(first.status).toBe(200);
    const again = await call("POST", "/v1/auth/exchange", { code });
    expect(again.status).toBe(410);
    expect(again.body.error?.code).toBe("used");
    const me = await call("GET", "/v1/auth/me", undefined, (first.body.data as { access_token: string }).access_token);
    expect(me.status).toBe(401);
  });

  it("answers unknown codes 401, expired ones 410, and malformed bodies 400", async () => {
    expect(await call("POST", "/v1/auth/exchange", { code: "eac_nope" })).toMatchObject({ status: 401, body: { error: { code: "unauthorized" } } });
    const code = await codeFor();
    await h.db.oAuthCode.updateMany({ where: { usedAt: null }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect(await call("POST", "/v1/auth/exchange", { code })).toMatchObject({ status: 410, body: { error: { code: "expired" } } });
    expect(await call("POST", "/v1/auth/exchange", {})).toMatchObject({ status: 400, body: { error: { code: "invalid_request" } } });
    expect(await call("POST", "/v1/auth/exchange", "{not json")).toMatchObject({ status: 400, body: { error: { code: "invalid_json" } } });
    expect((await fetch(`${server.url}/v1/auth/exchange`)).status).toBe(405);
  });

  it("keeps the CLI's PKCE-less codes and other clients' codes apart", async () => {
    // A CLI code has no challenge, so the standard token endpoint (which needs a verifier) refuses it.
    const cliCode = await codeFor();
    const verifier = randomBytes(32).toString("base64url");
    const viaToken = await fetch(`${server.url}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", code: cliCode, client_id: "memax-cli", code_verifier: verifier, redirect_uri: CALLBACK }),
    });
    expect(viaToken.status).toBe(400);
    expect(await viaToken.json()).toMatchObject({ error: "invalid_grant" });
    // …without using it up there: the CLI's own exchange still redeems it.
    const exchanged = await call("POST", "/v1/auth/exchange", { code: cliCode });
    expect(exchanged.status, JSON.stringify(exchanged.body)).toBe(200);
    // A registered app's code (with PKCE) is not redeemable here.
    const registered = await fetch(`${server.url}/oauth/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ client_name: "Other app", redirect_uris: [CALLBACK] }),
    }).then((r) => r.json() as Promise<{ client_id: string }>);
    const challenge = createHash("sha256").update(verifier).digest("base64url");
    const params = new URLSearchParams({ response_type: "code", client_id: registered.client_id, redirect_uri: CALLBACK, code_challenge: challenge, code_challenge_method: "S256" });
    const callback = await consentAt(server.url, `/oauth/authorize?${params}`, annCookie);
    const otherCode = callback.searchParams.get("code")!;
    expect(await call("POST", "/v1/auth/exchange", { code: otherCode })).toMatchObject({ status: 401, body: { error: { code: "unauthorized" } } });
    // A CLI code issued with PKCE is refused here without being used up: /oauth/token still redeems it.
    const withPkce = new URLSearchParams({ response_type: "code", client_id: "memax-cli", redirect_uri: CALLBACK, code_challenge: challenge, code_challenge_method: "S256" });
    const pkceCode = (await consentAt(server.url, `/oauth/authorize?${withPkce}`, annCookie)).searchParams.get("code")!;
    expect(await call("POST", "/v1/auth/exchange", { code: pkceCode })).toMatchObject({ status: 401, body: { error: { code: "unauthorized", message: expect.stringContaining("PKCE") } } });
    const redeemed = await fetch(`${server.url}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", code: pkceCode, client_id: "memax-cli", code_verifier: verifier, redirect_uri: CALLBACK }),
    });
    expect(redeemed.status).toBe(200);
    // …nor does the CLI's client skip PKCE for anyone else: a registered client without a challenge is refused.
    params.delete("code_challenge");
    params.delete("code_challenge_method");
    const noPkce = await fetch(`${server.url}/oauth/authorize?${params}`, { headers: { cookie: annCookie }, redirect: "manual" });
    expect(new URL(noPkce.headers.get("location")!).searchParams.get("error")).toBe("invalid_request");
  });

  it("limits a narrowed sign-in to what was consented, and keeps key management from it", async () => {
    const readOnly = await tokensFor({ access: "read" });
    expect((await call("GET", "/v1/memories", undefined, readOnly.access_token)).status).toBe(200);
    expect((await call("POST", "/v1/memories", { content: "not allowed" }, readOnly.access_token)).status).toBe(403);
    expect((await call("POST", "/v1/auth/api-keys", { name: "nope" }, readOnly.access_token)).status).toBe(403);
    const oneHub = await tokensFor({ hubs: [ann.personalHubId] });
    expect((await call("POST", "/v1/auth/api-keys", { name: "nope" }, oneHub.access_token)).status).toBe(403);
  });
});

describe("POST /v1/auth/refresh", () => {
  it("rotates: a new pair each time, and a replayed refresh token ends the sign-in", async () => {
    const first = await tokensFor();
    const second = await call("POST", "/v1/auth/refresh", { refresh_token: first.refresh_token });
    expect(second.status).toBe(200);
    const pair = second.body.data as { access_token: string; refresh_token: string; expires_in: number };
    expect(pair.refresh_token).not.toBe(first.refresh_token);
    expect(pair.expires_in).toBe(3600);
    expect((await call("GET", "/v1/auth/me", undefined, pair.access_token)).status).toBe(200);
    // Past the grace window for concurrent refreshes (see the next test).
    await h.db.oAuthRefreshToken.update({ where: { tokenHash: hashSecret(first.refresh_token) }, data: { usedAt: new Date(Date.now() - REFRESH_REUSE_GRACE_MS - 1000) } });
    const replay = await call("POST", "/v1/auth/refresh", { refresh_token: first.refresh_token });
    expect(replay).toMatchObject({ status: 410, body: { error: { code: "used" } } });
    expect((await call("GET", "/v1/auth/me", undefined, pair.access_token)).status).toBe(401);
    expect(await call("POST", "/v1/auth/refresh", { refresh_token: pair.refresh_token })).toMatchObject({ status: 410, body: { error: { code: "revoked" } } });
  });

  it("several CLI processes refreshing the same token at once: one rotates, the others get 410 used and the sign-in stays", async () => {
    const first = await tokensFor();
    const replies = await Promise.all(Array.from({ length: 4 }, () => call("POST", "/v1/auth/refresh", { refresh_token: first.refresh_token })));
    expect(replies.map((r) => r.status).sort()).toEqual([200, 410, 410, 410]);
    expect(replies.filter((r) => r.status === 410).every((r) => r.body.error?.code === "used")).toBe(true);
    const pair = replies.find((r) => r.status === 200)!.body.data as { access_token: string; refresh_token: string };
    // The losers keep working with the access token they had, and the next run reads the winner's stored pair.
    expect((await call("GET", "/v1/auth/me", undefined, first.access_token)).status).toBe(200);
    expect((await call("GET", "/v1/auth/me", undefined, pair.access_token)).status).toBe(200);
    expect((await call("POST", "/v1/auth/refresh", { refresh_token: pair.refresh_token })).status).toBe(200);
  });

  it("answers unknown, expired and missing refresh tokens clearly", async () => {
    expect(await call("POST", "/v1/auth/refresh", { refresh_token: "ert_nope" })).toMatchObject({ status: 401, body: { error: { code: "unauthorized" } } });
    const tokens = await tokensFor();
    await h.db.oAuthRefreshToken.updateMany({ where: { usedAt: null }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect(await call("POST", "/v1/auth/refresh", { refresh_token: tokens.refresh_token })).toMatchObject({ status: 410, body: { error: { code: "expired" } } });
    expect(await call("POST", "/v1/auth/refresh", { token: "x" })).toMatchObject({ status: 400, body: { error: { code: "invalid_request" } } });
  });

  it("ends with the grant: disconnecting the CLI in the dashboard stops refreshes", async () => {
    const tokens = await tokensFor();
    const grants = await call("GET", "/v1/auth/oauth-grants", undefined, ann.key);
    const grant = (grants.body.data as { grants: { id: string; client: { name: string } }[] }).grants[0]!;
    expect(JSON.stringify(grant)).toContain("Memax CLI");
    expect((await call("DELETE", `/v1/auth/oauth-grants/${grant.id}`, undefined, ann.key)).status).toBe(200);
    expect(await call("POST", "/v1/auth/refresh", { refresh_token: tokens.refresh_token })).toMatchObject({ status: 410, body: { error: { code: "revoked" } } });
  });
});
