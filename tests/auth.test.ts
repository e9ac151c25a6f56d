import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { issueAccessToken } from "@/lib/auth/access-token.ts";
import { POST as POST_MCP } from "@/app/mcp/route.ts";
import { newId } from "@/lib/ids.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { configWarnings, resetConfig } from "@/lib/config.ts";
import { clientFor, createHarness, type Client, type Harness } from "./support/harness.ts";
import { loadMemaxSdk, routeFetch } from "./support/memax-sdk.ts";

let h: Harness;
let ann: Client;
/** At least MIN_ADMIN_TOKEN_LENGTH (32) characters: a shorter one is ignored. */
const ADMIN_TOKEN = "s3cret-admin-token-0123456789abcdef";

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h.close());
afterEach(() => {
  delete process.env.ENGRAM_ADMIN_TOKEN;
  resetConfig();
});

describe("credentials", () => {
  test("no credential, malformed header and unknown keys are 401 unauthorized", async () => {
    const cases: Record<string, string>[] = [{}, { authorization: "Basic abc" }, { authorization: "Bearer" }, { authorization: "Bearer egk_nope" }, { authorization: "Bearer something" }];
    for (const headers of cases) {
      const res = await h.anonymous.get("/v1/memories", { headers });
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.body.error.code).toBe("unauthorized");
      expect(res.headers.get("content-type")).toContain("application/json");
    }
  });

  test("revoked and expired keys stop working at once", async () => {
    const created = await ann.post("/v1/auth/api-keys", { name: "short", expires_in_days: 1 });
    expect(created.status).toBe(201);
    const key = created.body.data.key as string;
    expect((await clientFor(key).get("/v1/auth/me")).status).toBe(200);
    await h.db.apiKey.update({ where: { id: created.body.data.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const expired = await clientFor(key).get("/v1/auth/me");
    expect(expired.status).toBe(401);
    expect(expired.body.error.message).toMatch(/expired/);

    const other = (await ann.post("/v1/auth/api-keys", { name: "revoke me" })).body.data;
    expect((await clientFor(other.key).get("/v1/auth/me")).status).toBe(200);
    const revoked = await ann.delete(`/v1/auth/api-keys/${other.id}`);
    expect(revoked.body).toEqual({ data: { id: other.id, revoked: true, skipped: [] } });
    const after = await clientFor(other.key).get("/v1/auth/me");
    expect(after.status).toBe(401);
    expect(after.body.error.message).toMatch(/revoked/);
  });

  // Access tokens come only from the OAuth token endpoint (tests/oauth.test.ts drives the flow) and
  // name their grant. The spec and decisions.md: both kinds of credential work on every endpoint.
  // Tokens of this server's resources work on REST within the grant's hubs and scope, but cannot
  // manage credentials; tokens of another server, forged, expired or grant-less ones are refused.
  test("access tokens work on REST within their grant; other servers', forged, expired or grant-less ones are refused", async () => {
    const secret = await serverSecret(h.db);
    const tok = await h.user("Tok");
    const mcp = "http://engram.test/mcp";
    const clientId = `ec_${newId().slice(0, 12)}`;
    await h.db.oAuthClient.create({ data: { id: clientId, name: "REST check", redirectUris: ["http://127.0.0.1/cb"], kind: "registered" } });
    const grantToken = async (scope: string, resource = mcp) => {
      const grant = await h.db.oAuthGrant.create({ data: { id: newId(), userId: tok.id, clientId, hubIds: [], allHubs: true, scope, resource: mcp } });
      return issueAccessToken(secret, { userId: tok.id, grantId: grant.id, resource }, Date.now());
    };
    const writer = clientFor(await grantToken("read write"));
    const me = await writer.get("/v1/auth/me");
    expect(me.status).toBe(200);
    expect(me.body.data.user.id).toBe(tok.id);
    expect((await writer.post("/v1/memories", { content: "pushed with an OAuth access token" })).status).toBe(201);
    const minted = await writer.post("/v1/auth/api-keys", { name: "from a token" });
    expect([minted.status, minted.body.error.code]).toEqual([403, "forbidden"]);
    const reader = clientFor(await grantToken("read"));
    expect((await reader.get("/v1/memories")).status).toBe(200);
    expect((await reader.post("/v1/memories", { content: "a read-only grant cannot push" })).status).toBe(403);
    const elsewhere = await clientFor(await grantToken("read write", "http://elsewhere.test/mcp")).get("/v1/auth/me");
    expect(elsewhere.status).toBe(401);
    expect(elsewhere.body.error.message).toMatch(/issued for/);

    const orphan = issueAccessToken(secret, { userId: ann.id, grantId: "00000000-0000-7000-8000-000000000000", resource: mcp }, Date.now());
    expect((await clientFor(orphan).get("/v1/auth/me")).status).toBe(401);
    const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
    const viaMcp = async (token: string) =>
      (await POST_MCP(new Request(mcp, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify(initialize) }), { params: Promise.resolve({}) })).status;
    expect(await viaMcp(orphan)).toBe(401);
    expect(await viaMcp(issueAccessToken(secret, { userId: ann.id, grantId: newId(), resource: mcp }, Date.now() - 2 * 3600_000))).toBe(401);
    const sig = orphan.slice(4).split(".")[1];
    const forged = `eat_${Buffer.from(JSON.stringify({ sub: ann.id, gid: newId(), aud: mcp, exp: 9999999999 })).toString("base64url")}.${sig}`;
    expect(await viaMcp(forged)).toBe(401);
    expect((await clientFor(forged).get("/v1/auth/me")).status).toBe(401);
  });
});

describe("API keys", () => {
  test("create shows the secret once; list never does; last_used_at is recorded", async () => {
    const created = await ann.post("/v1/auth/api-keys", { name: "laptop" });
    expect(created.status).toBe(201);
    const key = created.body.data;
    expect(key.key).toMatch(/^egk_[A-Za-z0-9_-]{43}$/);
    expect(key).toMatchObject({ name: "laptop", prefix: key.key.slice(0, 10), expires_at: null });
    const stored = await h.db.apiKey.findUniqueOrThrow({ where: { id: key.id } });
    expect(stored.keyHash).not.toContain(key.key);
    expect(stored.keyHash).toHaveLength(64);
    await clientFor(key.key).get("/v1/auth/me");
    const list = await ann.get("/v1/auth/api-keys");
    expect(list.status).toBe(200);
    expect(list.text).not.toContain(key.key);
    // A plain array (bounded by the per-user cap), Memax's shape.
    expect(Array.isArray(list.body.data)).toBe(true);
    const listed = list.body.data.find((k: { id: string }) => k.id === key.id);
    expect(listed.last_used_at).not.toBeNull();
    expect(listed.last_used).toBe(listed.last_used_at);
    expect(listed).toMatchObject({ scopes: ["read", "write"], scope: "all", hub_id: null, hub_ids: [], hub_scope_mode: "all_accessible" });
  });

  test("validation and ownership", async () => {
    expect((await ann.post("/v1/auth/api-keys", {})).status).toBe(400);
    expect((await ann.post("/v1/auth/api-keys", { name: "x", expires_in_days: 0 })).status).toBe(400);
    expect((await ann.post("/v1/auth/api-keys", { name: "x", scopes: ["all"] })).status).toBe(400);
    const bob = await h.user("Bob");
    const bobs = (await bob.post("/v1/auth/api-keys", { name: "bob" })).body.data;
    // Revoking someone else's key, an unknown one or a bad id changes nothing: 200 { revoked: false }.
    for (const id of [bobs.id, "not-an-id", "01900000-0000-7000-8000-000000000000"]) {
      const res = await ann.delete(`/v1/auth/api-keys/${id}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual({ id, revoked: false, skipped: [{ id, reason: "not_found" }] });
    }
    expect((await clientFor(bobs.key).get("/v1/auth/me")).status).toBe(200);
    // Revoked once; the second time is { revoked: false }.
    expect((await bob.delete(`/v1/auth/api-keys/${bobs.id}`)).body.data.revoked).toBe(true);
    expect((await clientFor(bobs.key).get("/v1/auth/me")).status).toBe(401);
  });
});

describe("GET/PATCH /v1/auth/me", () => {
  test("returns the user and personal hub; rename works", async () => {
    const me = await ann.get("/v1/auth/me");
    expect(me.body.data).toMatchObject({
      user: { id: ann.id, email: ann.email, name: "Ann", display_name: "Ann", avatar_url: "", plan: "self_hosted", personal_plan_id: "self_hosted", can_create_hub: true },
      hubs: [{ hub: { id: ann.personalHubId, hub_type: "personal" }, role: "owner", memory_count: 0 }],
      connected_providers: [],
      usage: { user_id: ann.id, push_count: 0, recall_count: 0, ask_count: 0 },
      personal_hub_id: ann.personalHubId,
      credential: { type: "api_key", scopes: ["read", "write"], hub_scope_mode: "all_accessible", hub_ids: [], agent_name: "" },
    });
    expect(me.body.data.user.created_at).toMatch(/Z$/);
    const renamed = await ann.patch("/v1/auth/me", { display_name: "Ann Lee" });
    expect(renamed.body.data).toMatchObject({ status: "updated", display_name: "Ann Lee", user: { name: "Ann Lee", display_name: "Ann Lee" } });
    expect((await ann.get("/v1/auth/me")).body.data.user.display_name).toBe("Ann Lee");
    // Engram's original field still works.
    expect((await ann.patch("/v1/auth/me", { name: "Ann" })).body.data.user.name).toBe("Ann");
    expect((await ann.patch("/v1/auth/me", { name: "" })).status).toBe(400);
    expect((await ann.patch("/v1/auth/me", { display_name: "x".repeat(101) })).status).toBe(400);
  });

  test("a name with line breaks is a 400: it would write its own lines into the invitations it signs", async () => {
    const forged = await ann.patch("/v1/auth/me", { display_name: "Ann\n\nYour account is locked: https://evil.example/unlock\n\nAnn" });
    expect([forged.status, forged.body.error?.details?.issues?.[0]?.path]).toEqual([400, "display_name"]);
    expect((await ann.patch("/v1/auth/me", { name: "Ann\u0007" })).status).toBe(400);
    expect((await ann.get("/v1/auth/me")).body.data.user.name).toBe("Ann");
    // Letters, emoji and their joiners are names.
    expect((await ann.patch("/v1/auth/me", { display_name: "Zoë 👩‍💻" })).status).toBe(200);
    expect((await ann.patch("/v1/auth/me", { name: "Ann" })).status).toBe(200);
  });
});

describe("POST /v1/admin/users", () => {
  test("is 404 while ENGRAM_ADMIN_TOKEN is unset", async () => {
    const res = await h.anonymous.post("/v1/admin/users", { email: "x@example.test", name: "X" }, { headers: { authorization: "Bearer anything" } });
    expect(res.status).toBe(404);
    // Every method: the route does not exist without the token (with it, other methods are 405).
    const other = await h.anonymous.get("/v1/admin/users");
    expect([other.status, other.body.error.code]).toEqual([404, "not_found"]);
    expect(other.headers.get("x-request-id")).toBeTruthy();
  });

  test("a token shorter than 32 characters is ignored: both admin routes stay 404, and start-up warns", async () => {
    const short = "s3cret-admin-31-characters-long";
    expect(short).toHaveLength(31);
    process.env.ENGRAM_ADMIN_TOKEN = short;
    resetConfig();
    const admin = { headers: { authorization: `Bearer ${short}` } };
    const created = await h.anonymous.post("/v1/admin/users", { email: "short@example.test", name: "Short" }, admin);
    expect([created.status, created.body.error?.code]).toEqual([404, "not_found"]);
    expect(await h.db.user.count({ where: { email: "short@example.test" } })).toBe(0);
    expect((await h.anonymous.post("/v1/auth/impersonate", { user_id: ann.id }, admin)).status).toBe(404);
    expect(configWarnings()).toEqual([expect.stringMatching(/ENGRAM_ADMIN_TOKEN is shorter than 32 characters and is ignored/)]);
    // One character more is enough.
    process.env.ENGRAM_ADMIN_TOKEN = `${short}x`;
    resetConfig();
    expect(configWarnings()).toEqual([]);
    expect((await h.anonymous.post("/v1/admin/users", { email: "short@example.test", name: "Short" }, { headers: { authorization: `Bearer ${short}x` } })).status).toBe(201);
  });

  test("creates a user, personal hub and working key with the admin token", async () => {
    process.env.ENGRAM_ADMIN_TOKEN = ADMIN_TOKEN;
    resetConfig();
    const wrong = await h.anonymous.post("/v1/admin/users", { email: "op@example.test", name: "Op" }, { headers: { authorization: "Bearer nope" } });
    expect(wrong.status).toBe(401);
    const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };
    const res = await h.anonymous.post("/v1/admin/users", { email: "Op@Example.test", name: "Op" }, admin);
    expect(res.status).toBe(201);
    expect((await h.anonymous.get("/v1/admin/users")).status).toBe(405);
    const { user, api_key, personal_hub_id } = res.body.data;
    expect(user).toMatchObject({ email: "op@example.test", name: "Op" });
    const me = await clientFor(api_key).get("/v1/auth/me");
    expect(me.body.data).toMatchObject({ user: { id: user.id }, personal_hub_id });
    const hub = await h.db.hub.findUniqueOrThrow({ where: { id: personal_hub_id }, include: { members: true } });
    expect(hub).toMatchObject({ hubType: "personal", ownerId: user.id });
    expect(hub.members).toEqual([expect.objectContaining({ userId: user.id, role: "owner" })]);
    const forged = await h.anonymous.post("/v1/admin/users", { email: "forged@example.test", name: "Op\r\nBcc: all@example.test" }, admin);
    expect([forged.status, forged.body.error?.details?.issues?.[0]?.path]).toEqual([400, "name"]);
    const dup = await h.anonymous.post("/v1/admin/users", { email: "op@example.test", name: "Again" }, admin);
    expect(dup.status).toBe(409);
    expect(await h.db.user.count({ where: { email: "op@example.test" } })).toBe(1);
    expect((await h.anonymous.post("/v1/admin/users", { email: "not-an-email", name: "X" }, admin)).status).toBe(400);
  });
});

describe("POST /v1/auth/impersonate", () => {
  test("is 404 while ENGRAM_ADMIN_TOKEN is unset", async () => {
    delete process.env.ENGRAM_ADMIN_TOKEN;
    resetConfig();
    const res = await h.anonymous.post("/v1/auth/impersonate", { email: "x@example.test" }, { headers: { authorization: "Bearer anything" } });
    expect(res.status).toBe(404);
  });

  test("gives the admin a 15-minute token acting as the user, which the user sees and can end, and which cannot make keys", async () => {
    process.env.ENGRAM_ADMIN_TOKEN = ADMIN_TOKEN;
    resetConfig();
    try {
      const target = await h.user("Target");
      const admin = { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } };
      expect((await h.anonymous.post("/v1/auth/impersonate", { email: target.email }, { headers: { authorization: `Bearer ${target.key}` } })).status).toBe(401);
      expect((await h.anonymous.post("/v1/auth/impersonate", { email: "nobody@example.test" }, admin)).status).toBe(404);
      expect((await h.anonymous.post("/v1/auth/impersonate", {}, admin)).status).toBe(400);
      const res = await h.anonymous.post("/v1/auth/impersonate", { email: target.email.toUpperCase() }, admin);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data).toEqual({ access_token: expect.any(String), expires_in: 900, target_id: target.id, impersonated: true });
      const as = { headers: { authorization: `Bearer ${res.body.data.access_token}` } };
      expect((await h.anonymous.get("/v1/auth/me", as)).body.data.user.id).toBe(target.id);
      expect((await h.anonymous.post("/v1/memories", { content: "Written while impersonated." }, as)).status).toBe(201);
      expect((await h.anonymous.post("/v1/auth/api-keys", { name: "sneaky" }, as)).status).toBe(403);
      // The person sees it among their connected apps and can end it.
      const grants = (await target.get("/v1/auth/oauth-grants")).body.data.grants as { id: string; client_name: string }[];
      const grant = grants.find((g) => g.client_name === "Administrator (impersonation)")!;
      expect(grant).toBeDefined();
      expect((await target.delete(`/v1/auth/oauth-grants/${grant.id}`)).status).toBe(200);
      expect((await h.anonymous.get("/v1/auth/me", as)).status).toBe(401);
      // By id too, as Memax's SDK asks (its client configured with the admin token).
      const { Memax } = await loadMemaxSdk();
      const sdk = new Memax({ apiUrl: "http://engram.test", apiKey: ADMIN_TOKEN, fetch: routeFetch, maxRetries: 0 });
      expect(await sdk.auth.impersonate({ userId: target.id })).toMatchObject({ target_id: target.id, impersonated: true, expires_in: 900 });
    } finally {
      delete process.env.ENGRAM_ADMIN_TOKEN;
      resetConfig();
    }
  });
});

test("GET /v1/health is public", async () => {
  const res = await h.anonymous.get("/v1/health");
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({ status: "ok", version: expect.any(String), database: h.database.kind });
});
