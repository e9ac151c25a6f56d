import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { issueAccessToken } from "@/lib/auth/access-token.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { listRouteFiles, routerFor } from "./support/router.ts";
import { addMemberByEmailInvite } from "./support/add-member.ts";

/**
 * /mcp, /mcp/chatgpt and every OAuth route × identities: the status each gets, and MCP tool
 * calls on a hub per role, with the same leak checks as tests/security.test.ts. Identities
 * add OAuth access tokens: full, narrowed to another hub, read-only, bound to the other
 * resource, and of a revoked grant. A route file without a row fails "every route has a row".
 */

const BASE = "http://engram.test";
const dispatch = routerFor(["mcp", "oauth", ".well-known"]);
const dispatchRest = routerFor(["v1"]);

const IDENTITIES = [
  "anonymous",
  "invalid_key",
  "non_member",
  "viewer",
  "contributor",
  "admin",
  "owner",
  "token_owner",
  "token_other_hub",
  "token_owner_read",
  "token_wrong_resource",
  "token_revoked",
] as const;
type Identity = (typeof IDENTITIES)[number];
type Expect = Record<Identity, number>;

const all = (status: number): Expect => Object.fromEntries(IDENTITIES.map((i) => [i, status])) as Expect;
const bearer = (status: number): Expect => ({ ...all(status), anonymous: 401, invalid_key: 401, token_wrong_resource: 401, token_revoked: 401 });

interface Row {
  method: string;
  path: string;
  body?: () => string;
  contentType?: string;
  expect: Expect;
}

const mcpBody = () => JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
const ROUTES: Record<string, Row> = {
  "POST /mcp": { method: "POST", path: "/mcp", body: mcpBody, expect: bearer(200) },
  "POST /mcp/chatgpt": { method: "POST", path: "/mcp/chatgpt", body: mcpBody, expect: { ...bearer(200), token_owner: 401, token_other_hub: 401, token_owner_read: 401, token_wrong_resource: 200 } },
  "GET /.well-known/oauth-authorization-server": { method: "GET", path: "/.well-known/oauth-authorization-server", expect: all(200) },
  "GET /.well-known/oauth-protected-resource": { method: "GET", path: "/.well-known/oauth-protected-resource", expect: all(200) },
  "GET /.well-known/oauth-protected-resource/[...path]": { method: "GET", path: "/.well-known/oauth-protected-resource/mcp", expect: all(200) },
  "POST /oauth/register": {
    method: "POST",
    path: "/oauth/register",
    body: () => JSON.stringify({ client_name: "matrix", redirect_uris: ["http://127.0.0.1:3599/cb"] }),
    expect: all(201),
  },
  // Bearer credentials mean nothing to the browser-facing endpoints: they want the session cookie.
  "GET /oauth/authorize": { method: "GET", path: "/oauth/authorize?client_id=ec_unknown&response_type=code", expect: all(400) },
  "POST /oauth/authorize": { method: "POST", path: "/oauth/authorize", body: () => "decision=allow", contentType: "application/x-www-form-urlencoded", expect: all(401) },
  // Only for the person the consent page was shown to (tests/oauth-consent-request.test.ts): a request and token of no one is not found; apps' tokens may not ask.
  "GET /oauth/authorize/consent-request": {
    method: "GET",
    path: `/oauth/authorize/consent-request?request_id=W1siY2xpZW50X2lkIiwiZWNfeCJdXQ&consent_token=${Date.now()}.AAAA`,
    expect: { ...all(404), anonymous: 401, invalid_key: 401, token_owner: 403, token_other_hub: 403, token_owner_read: 403, token_wrong_resource: 403, token_revoked: 401 },
  },
  "POST /oauth/token": { method: "POST", path: "/oauth/token", body: () => "grant_type=refresh_token&refresh_token=ert_x&client_id=ec_x", contentType: "application/x-www-form-urlencoded", expect: all(400) },
  "POST /oauth/revoke": { method: "POST", path: "/oauth/revoke", body: () => "token=ert_unknown", contentType: "application/x-www-form-urlencoded", expect: all(200) },
};

let h: Harness;
let users: Record<"owner" | "admin" | "contributor" | "viewer" | "non_member", Client>;
let tokens: Record<string, string>;
let hub: { id: string; name: string; slug: string; secretTitle: string; secretContent: string; memoryId: string };
let foreign: { hubId: string; title: string; content: string };

async function grantToken(user: Client, options: { hubIds?: string[]; write?: boolean; resource?: string; revoked?: boolean }): Promise<string> {
  const clientId = `ec_${randomBytes(6).toString("hex")}`;
  await h.db.oAuthClient.create({ data: { id: clientId, name: "matrix", redirectUris: ["http://127.0.0.1/cb"], kind: "registered" } });
  const grant = await h.db.oAuthGrant.create({
    data: {
      id: newId(),
      userId: user.id,
      clientId,
      hubIds: options.hubIds ?? [],
      allHubs: !options.hubIds,
      scope: options.write === false ? "read" : "read write",
      resource: `${BASE}/mcp`,
      revokedAt: options.revoked ? new Date() : null,
    },
  });
  return issueAccessToken(await serverSecret(h.db), { userId: user.id, grantId: grant.id, resource: options.resource ?? `${BASE}/mcp` }, Date.now());
}

beforeAll(async () => {
  h = await createHarness();
  users = {
    owner: await h.user("Owner"),
    admin: await h.user("Admin"),
    contributor: await h.user("Contributor"),
    viewer: await h.user("Viewer"),
    non_member: await h.user("Outsider"),
  };
  const tag = randomBytes(6).toString("hex");
  const created = await users.owner.post("/v1/hubs", { name: `Secret hub ${tag}` });
  for (const role of ["admin", "contributor", "viewer"] as const) {
    expect((await addMemberByEmailInvite(users.owner, created.body.data.id, users[role], role)).status).toBe(201);
  }
  const secretTitle = `Secret title ${tag}`;
  const secretContent = `Classified content ${tag}`;
  const memory = await users.owner.post("/v1/memories", { title: secretTitle, content: secretContent }, { headers: { "x-hub-id": created.body.data.id } });
  hub = { id: created.body.data.id, name: created.body.data.name, slug: created.body.data.slug, secretTitle, secretContent, memoryId: memory.body.data.id };
  const stranger = await h.user("Stranger");
  const other = await stranger.post("/v1/hubs", { name: `Foreign ${tag}` });
  foreign = { hubId: other.body.data.id, title: `Foreign title ${tag}`, content: `Foreign content ${tag}` };
  await stranger.post("/v1/memories", { title: foreign.title, content: foreign.content }, { headers: { "x-hub-id": foreign.hubId } });
  tokens = {
    token_owner: await grantToken(users.owner, {}),
    token_other_hub: await grantToken(users.owner, { hubIds: [users.owner.personalHubId] }),
    token_owner_read: await grantToken(users.owner, { write: false }),
    token_wrong_resource: await grantToken(users.owner, { resource: `${BASE}/mcp/chatgpt` }),
    token_revoked: await grantToken(users.owner, { revoked: true }),
  };
});
afterAll(async () => {
  await h?.close();
});

function credentialOf(identity: Identity): string | undefined {
  if (identity === "anonymous") return undefined;
  if (identity === "invalid_key") return `egk_${randomBytes(32).toString("base64url")}`;
  if (identity in users) return users[identity as keyof typeof users].key;
  return tokens[identity];
}

async function send(identity: Identity, method: string, path: string, body?: string, contentType = "application/json") {
  const headers = new Headers({ accept: "application/json, text/event-stream" });
  const credential = credentialOf(identity);
  if (credential) headers.set("authorization", `Bearer ${credential}`);
  if (body !== undefined) headers.set("content-type", contentType);
  const res = await dispatch(new Request(`${BASE}${path}`, { method, headers, body }));
  return { status: res.status, headers: res.headers, text: await res.text() };
}

function assertNoLeak(text: string, identity: Identity, what: string, outsider: boolean) {
  for (const secret of [foreign.hubId, foreign.title, foreign.content]) expect(text, `${what} as ${identity} leaks another hub`).not.toContain(secret);
  if (outsider) for (const secret of [hub.id, hub.name, hub.slug, hub.secretTitle, hub.secretContent]) expect(text, `${what} as ${identity} leaks the hub`).not.toContain(secret);
}

describe("route table", () => {
  it("has a row for every MCP, OAuth and well-known route and method", async () => {
    const implemented: string[] = [];
    for (const dir of ["mcp", "oauth", ".well-known"]) {
      for (const route of listRouteFiles(`${process.cwd()}/app/${dir}`)) {
        const mod = (await import(route.file)) as Record<string, unknown>;
        for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"]) {
          const handler = mod[method] as ((req: Request, ctx: unknown) => Promise<Response>) | undefined;
          if (!handler) continue;
          const res = await handler(new Request(`${BASE}${route.pattern}`, { method }), { params: Promise.resolve({}) });
          const body = (await res.json().catch(() => undefined)) as { error?: { code?: string } } | undefined;
          if (!(res.status === 405 && body?.error?.code === "method_not_allowed")) implemented.push(`${method} ${route.pattern}`);
        }
      }
    }
    expect(implemented.sort()).toEqual(Object.keys(ROUTES).sort());
  });
});

describe.each(Object.entries(ROUTES))("%s", (key, row) => {
  it.each(IDENTITIES)("as %s", async (identity) => {
    const res = await send(identity, row.method, row.path, row.body?.(), row.contentType);
    expect(res.status, `${key} as ${identity}: ${res.text.slice(0, 300)}`).toBe(row.expect[identity]);
    if (res.status === 401 && row.path.startsWith("/mcp")) expect(res.headers.get("www-authenticate")).toMatch(/^Bearer resource_metadata="/);
    assertNoLeak(res.text, identity, key, true);
  });
});

/** Tool calls on the fixture hub: "ok", or the error code the tool result carries. */
type ToolExpect = Record<Identity, string | number>;
const members = (result: string): ToolExpect => ({ ...all(401), non_member: "not_found", viewer: result, contributor: result, admin: result, owner: result, token_owner: result, token_other_hub: "not_found", token_owner_read: result });

const TOOL_CALLS: Record<string, { args: () => Record<string, unknown>; expect: ToolExpect }> = {
  engram_get: { args: () => ({ id: hub.memoryId }), expect: members("ok") },
  engram_list: { args: () => ({ hub_id: hub.id }), expect: members("ok") },
  engram_hub_members: { args: () => ({ hub_id: hub.slug }), expect: members("ok") },
  engram_topics: { args: () => ({ hub_id: hub.id }), expect: members("ok") },
  engram_recall: { args: () => ({ query: "classified content", hub_id: hub.id }), expect: members("ok") },
  engram_ask: { args: () => ({ query: "classified content", hub_id: hub.id }), expect: members("ok") },
  engram_push: { args: () => ({ content: `matrix push ${randomBytes(4).toString("hex")}`, hub_id: hub.id }), expect: { ...members("ok"), viewer: "forbidden", token_owner_read: "forbidden" } },
  engram_request_decision: { args: () => ({ question: "Which way?", options: ["Left", "Right"], hub_id: hub.id }), expect: { ...members("ok"), viewer: "forbidden", token_owner_read: "forbidden" } },
  // Deleting the owner's memory: contributors may delete only their own (policy "own"). Last, and read-only tokens first.
  engram_forget: { args: () => ({ id: hub.memoryId }), expect: { ...members("forbidden"), admin: "ok", owner: "ok", token_owner: "ok", token_owner_read: "forbidden" } },
};

describe.each(Object.entries(TOOL_CALLS))("tools/call %s", (tool, call) => {
  // Identities in an order where the one successful delete comes last.
  const order: Identity[] = ["anonymous", "invalid_key", "token_wrong_resource", "token_revoked", "non_member", "token_other_hub", "token_owner_read", "viewer", "contributor", "owner", "token_owner", "admin"];
  it.each(order)("as %s", async (identity) => {
    // Each successful delete needs a memory of its own.
    if (tool === "engram_forget" && call.expect[identity] === "ok") {
      const fresh = await users.owner.post("/v1/memories", { title: hub.secretTitle, content: `${hub.secretContent} ${randomBytes(3).toString("hex")}` }, { headers: { "x-hub-id": hub.id } });
      hub.memoryId = fresh.body.data.id;
    }
    // A hub's board holds at most 3 open decisions: each successful ask starts from none.
    if (tool === "engram_request_decision") await h.db.decisionGate.deleteMany({ where: { hubId: hub.id } });
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: tool, arguments: call.args() } });
    const res = await send(identity, "POST", "/mcp", body);
    const expected = call.expect[identity];
    if (typeof expected === "number") {
      expect(res.status, `${tool} as ${identity}`).toBe(expected);
      assertNoLeak(res.text, identity, tool, true);
      return;
    }
    expect(res.status, res.text.slice(0, 300)).toBe(200);
    const result = JSON.parse(res.text).result;
    if (expected === "ok") expect(result.isError, `${tool} as ${identity}: ${res.text.slice(0, 300)}`).toBeFalsy();
    else {
      expect(result.isError, `${tool} as ${identity}`).toBe(true);
      expect(result.structuredContent.error.code, `${tool} as ${identity}`).toBe(expected);
    }
    assertNoLeak(res.text, identity, tool, expected === "not_found");
  });
});

describe("a connected app's token administers no hub", () => {
  it("cannot invite, add members, change settings, transfer or delete, whatever its user's role; it still works with memories", async () => {
    const token = tokens.token_owner!;
    const call = (method: string, path: string, body?: unknown) =>
      dispatchRest(new Request(`${BASE}${path}`, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) }));
    const refused: [string, string, unknown?][] = [
      ["POST", `/v1/hubs/${hub.id}/invites`, {}],
      ["GET", `/v1/hubs/${hub.id}/invites`],
      ["POST", `/v1/hubs/${hub.id}/members`, { user_id: users.non_member.id, role: "viewer" }],
      ["PATCH", `/v1/hubs/${hub.id}/members/${users.viewer.id}`, { role: "admin" }],
      ["DELETE", `/v1/hubs/${hub.id}/members/${users.contributor.id}`],
      ["PATCH", `/v1/hubs/${hub.id}`, { name: "Renamed by an app" }],
      ["POST", `/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: users.admin.id }],
      ["DELETE", `/v1/hubs/${hub.id}`],
    ];
    for (const [method, path, body] of refused) {
      const res = await call(method, path, body);
      const text = await res.text();
      expect([method, path, res.status], text).toEqual([method, path, 403]);
      expect(JSON.parse(text).error.message).toMatch(/connected app/);
    }
    expect(await h.db.invite.count({ where: { hubId: hub.id, revokedAt: null, acceptedAt: null } })).toBe(0);
    expect((await h.db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId: users.contributor.id } } }))?.role).toBe("contributor");
    expect((await h.db.hub.findUnique({ where: { id: hub.id } }))?.name).toBe(hub.name);
    // Memories: push, and delete someone else's (the owner may; the consent page says so).
    const pushed = await call("POST", "/v1/memories", { content: `pushed by an app ${randomBytes(4).toString("hex")}` });
    expect(pushed.status).toBe(201);
    const theirs = await users.contributor.post("/v1/memories", { content: `the contributor's ${randomBytes(4).toString("hex")}` }, { headers: { "x-hub-id": hub.id } });
    expect((await call("DELETE", `/v1/memories/${theirs.body.data.id}`)).status).toBe(200);
    // The same user's own API key still administers.
    expect((await users.owner.get(`/v1/hubs/${hub.id}/invites`)).status).toBe(200);
    // Nor does an app see its user's other credentials: the API keys, the other connected apps.
    for (const path of ["/v1/auth/api-keys", "/v1/auth/oauth-grants", "/v1/configs", "/v1/agent-sessions", "/v1/personas", "/v1/settings", "/v1/agents"]) {
      expect([path, (await call("GET", path)).status]).toEqual([path, 403]);
    }
    expect((await call("PUT", "/v1/configs", { agent: "cursor", file_path: "AGENTS.md", scope: "global", content: "injected" })).status).toBe(403);
    expect((await users.owner.get("/v1/auth/api-keys")).status).toBe(200);
  });
});

describe("a connected app's token changes no hub membership of its user", () => {
  it("cannot accept or cancel an ownership transfer, accept an invite or leave; the user's own key can", async () => {
    const owner = await h.user("Transferor");
    const target = await h.user("Target");
    const team = (await owner.post("/v1/hubs", { name: `Transfer ${randomBytes(3).toString("hex")}` })).body.data.id as string;
    expect((await addMemberByEmailInvite(owner, team, target, "admin")).status).toBe(201);
    const transfer = await owner.post(`/v1/hubs/${team}/ownership-transfer`, { target_user_id: target.id });
    expect(transfer.status).toBe(201);
    const appToken = await grantToken(target, {});
    const call = (method: string, path: string, body?: unknown) =>
      dispatchRest(new Request(`${BASE}${path}`, { method, headers: { authorization: `Bearer ${appToken}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) }));
    const other = (await owner.post("/v1/hubs", { name: `Invites ${randomBytes(3).toString("hex")}` })).body.data.id as string;
    const invite = (await owner.post(`/v1/hubs/${other}/invites`, { role: "contributor" })).body.data.token as string;
    for (const [method, path] of [
      ["POST", `/v1/hubs/${team}/ownership-transfer/${transfer.body.data.id}/accept`],
      ["POST", `/v1/hubs/${team}/ownership-transfer/${transfer.body.data.id}/cancel`],
      ["POST", `/v1/invites/${invite}/accept`],
      ["POST", `/v1/hubs/${team}/leave`],
      ["DELETE", `/v1/hubs/${team}/members/${target.id}`],
    ] as const) {
      const res = await call(method, path);
      const text = await res.text();
      expect([method, path, res.status], text).toEqual([method, path, 403]);
    }
    expect((await h.db.hub.findUniqueOrThrow({ where: { id: team } })).ownerId).toBe(owner.id);
    expect(await h.db.hubMember.count({ where: { hubId: other, userId: target.id } })).toBe(0);
    // The person's own key: the transfer goes through.
    expect((await target.post(`/v1/hubs/${team}/ownership-transfer/${transfer.body.data.id}/accept`)).status).toBe(200);
  });
});

describe("a connected app's token reads no member's e-mail address", () => {
  /**
   * Addresses go to those who manage a hub's members; an app acting for an owner or admin manages
   * nothing (it administers no hub), yet hub detail, the member list and engram_hub_members handed it
   * every member's address in full.
   */
  it("hub detail and the member list mask other members' addresses for an owner's app; the owner's own key sees them", async () => {
    const token = tokens.token_owner!;
    const get = async (path: string) => {
      const res = await dispatchRest(new Request(`${BASE}${path}`, { headers: { authorization: `Bearer ${token}` } }));
      return { status: res.status, text: await res.text() };
    };
    for (const path of [`/v1/hubs/${hub.id}`, `/v1/hubs/${hub.id}/members?limit=100`]) {
      const res = await get(path);
      expect([path, res.status]).toEqual([path, 200]);
      for (const role of ["admin", "contributor", "viewer"] as const) {
        expect(res.text, `${path} names ${role}'s address`).not.toContain(users[role].email);
        expect(res.text).toContain(`${users[role].email[0]}•••@`);
      }
    }
    const own = await users.owner.get(`/v1/hubs/${hub.id}/members?limit=100`);
    expect(own.text).toContain(users.admin.email);
  });
});
