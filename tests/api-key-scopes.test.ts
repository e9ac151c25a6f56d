import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MAX_API_KEYS_PER_USER } from "@/lib/auth/create-api-key.ts";
import { pruneRevokedApiKeys } from "@/lib/auth/prune-revoked-api-keys.ts";
import { clientFor, createHarness, type Client, type Harness } from "./support/harness.ts";

// API keys with real scopes: a hub allowlist, read-only, agent attribution — enforced by the one
// hub-access resolver everywhere a hub is resolved (withAuth, lookups, lists, batches, recall).

let h: Harness;
let ann: Client;
let bob: Client;
let team: string;
let other: string;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  team = await h.teamHub(ann, [[bob, "contributor"]]);
  other = await h.teamHub(ann);
});
afterAll(() => h.close());

async function push(client: Client | ReturnType<typeof clientFor>, content: string, hubId?: string) {
  const res = await client.post("/v1/memories", { content }, hubId ? { headers: { "x-hub-id": hubId } } : {});
  expect(res.status, res.text).toBe(201);
  return res.body.data as { id: string; hub_id: string; source_agent: string | null };
}

describe("creating keys", () => {
  test("stores and lists a hub named twice (in any case, in hub_id and hub_ids) once", async () => {
    const res = await ann.post("/v1/auth/api-keys", { name: "twice", hub_id: team.toUpperCase(), hub_ids: [team, team.toUpperCase(), other] });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.hub_ids).toEqual([team, other]);
    expect((await h.db.apiKey.findUniqueOrThrow({ where: { id: res.body.data.id } })).hubIds).toEqual([team, other]);
    const listed = (await ann.get("/v1/auth/api-keys")).body.data.find((key: { id: string }) => key.id === res.body.data.id);
    expect(listed.hub_ids).toEqual([team, other]);
  });

  test("accepts Memax's fields and answers its shape", async () => {
    const res = await ann.post("/v1/auth/api-keys", {
      name: "ci",
      hub_id: team,
      hub_ids: [other, team],
      scopes: ["read"],
      agent_name: "claude-code",
      permissions: ["memories:read"],
      trust_level: "standard",
      expires_in_days: 30,
    });
    expect(res.status).toBe(201);
    const key = res.body.data;
    expect(key).toMatchObject({
      name: "ci",
      scopes: ["read"],
      hub_id: team,
      hub_ids: [team, other],
      hub_scope_mode: "hub_allowlist",
      agent_name: "claude-code",
      permissions: ["memories:read"],
      default_permissions: ["memories:read"],
      trust_level: "standard",
    });
    expect(key.key).toMatch(/^egk_/);
    expect(key.scope.split(",")).toHaveLength(2);
    expect(key.expires_at).not.toBeNull();
    const listed = (await ann.get("/v1/auth/api-keys")).body.data.find((k: any) => k.id === key.id);
    expect(listed).toMatchObject({ hub_ids: [team, other], scopes: ["read"], agent_name: "claude-code", trust_level: "standard", last_used: null });
    expect(listed).not.toHaveProperty("key");
  });

  test("a listed key names in scope only the slugs of hubs its owner is still a member of (a hub left, then renamed, stays unnamed)", async () => {
    const cat = await h.user("Cat");
    const left = await h.teamHub(ann, [[cat, "contributor"]]);
    const kept = await h.teamHub(ann, [[cat, "viewer"]]);
    const created = await cat.post("/v1/auth/api-keys", { name: "two hubs", hub_ids: [left, kept] });
    expect(created.status, created.text).toBe(201);
    expect((await cat.post(`/v1/hubs/${left}/leave`)).status).toBe(200);
    expect((await ann.patch(`/v1/hubs/${left}`, { slug: "acquisition-target-q3" })).status).toBe(200);
    const keptSlug = (await ann.get(`/v1/hubs/${kept}`)).body.data.hub.slug;
    const listed = (await cat.get("/v1/auth/api-keys")).body.data.find((k: { id: string }) => k.id === created.body.data.id);
    expect(listed.scope).toBe(keptSlug);
    expect(JSON.stringify(listed)).not.toContain("acquisition-target-q3");
  });

  test("an empty scopes list (Memax's CLI without --grant) means read and write; unknown values are 400", async () => {
    const res = await ann.post("/v1/auth/api-keys", { name: "default", scopes: [] });
    expect(res.body.data).toMatchObject({ scopes: ["read", "write"], hub_scope_mode: "all_accessible", hub_id: null, hub_ids: [], scope: "all" });
    const bad = await ann.post("/v1/auth/api-keys", { name: "bad", scopes: ["admin"] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.issues[0].path).toBe("scopes.0");
    expect((await ann.post("/v1/auth/api-keys", { name: "bad", trust_level: "god" })).status).toBe(400);
  });

  test("Memax's finer grants (memax setup --allow-delete, --grant organize) are accepted with write and kept as permissions", async () => {
    const res = await ann.post("/v1/auth/api-keys", { name: "mcp-setup", scopes: ["read", "write", "organize", "delete", "agent-sync"], expires_in_days: 90 });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ scopes: ["read", "write"], permissions: ["organize", "delete", "agent-sync"], default_permissions: ["organize", "delete", "agent-sync"] });
    const withConfig = await ann.post("/v1/auth/api-keys", { name: "cfg", scopes: ["write", "config:claude-code"], permissions: ["memories:read"] });
    expect(withConfig.body.data).toMatchObject({ scopes: ["write"], permissions: ["memories:read", "config:claude-code"] });
    const before = await h.db.apiKey.count({ where: { userId: ann.id } });
    // Without write they would ask for part of write, which an Engram key cannot hold: refused, not widened.
    const partial = await ann.post("/v1/auth/api-keys", { name: "partial", scopes: ["read", "delete"] });
    expect(partial.status).toBe(400);
    expect(partial.body.error).toMatchObject({ code: "invalid_request", message: expect.stringContaining('add "write"') });
    // Account-level grants on a hub-limited key are refused, as Memax's CLI refuses them.
    const limited = await ann.post("/v1/auth/api-keys", { name: "limited", hub_id: team, scopes: ["write", "agent-sync"] });
    expect(limited.status).toBe(400);
    expect(limited.body.error.message).toContain("account-level");
    expect((await ann.post("/v1/auth/api-keys", { name: "ok", hub_id: team, scopes: ["write", "delete"] })).status).toBe(201);
    expect((await ann.post("/v1/auth/api-keys", { name: "typo", scopes: ["write", "delte"] })).status).toBe(400);
    expect(await h.db.apiKey.count({ where: { userId: ann.id } })).toBe(before + 1);
  });

  test("a hub the caller does not belong to is not found, and no key is written", async () => {
    const bobsOwn = await h.teamHub(bob);
    const before = await h.db.apiKey.count({ where: { userId: ann.id } });
    const res = await ann.post("/v1/auth/api-keys", { name: "x", hub_ids: [team, bobsOwn] });
    expect(res.status).toBe(404);
    expect(res.text).not.toContain("Team");
    expect(await h.db.apiKey.count({ where: { userId: ann.id } })).toBe(before);
  });

  test(`at most ${MAX_API_KEYS_PER_USER} active keys per user (revoking frees a slot)`, async () => {
    const carol = await h.user("Carol");
    const existing = await h.db.apiKey.count({ where: { userId: carol.id, revokedAt: null } });
    for (let i = existing; i < MAX_API_KEYS_PER_USER; i++) {
      expect((await carol.post("/v1/auth/api-keys", { name: `k${i}` })).status).toBe(201);
    }
    const over = await carol.post("/v1/auth/api-keys", { name: "one too many" });
    expect(over.status).toBe(409);
    expect(over.body.error.details.limit).toBe(MAX_API_KEYS_PER_USER);
    const list = (await carol.get("/v1/auth/api-keys")).body.data;
    expect(list).toHaveLength(MAX_API_KEYS_PER_USER);
    expect((await carol.delete(`/v1/auth/api-keys/${list[0].id}`)).body.data.revoked).toBe(true);
    expect((await carol.post("/v1/auth/api-keys", { name: "again" })).status).toBe(201);
  });

  test("keys revoked over 30 days ago are deleted, so creating and revoking in a loop does not add rows for good", async () => {
    const dan = await h.user("Dan");
    const ids: string[] = [];
    for (const name of ["long revoked", "recently revoked", "live"]) ids.push((await dan.post("/v1/auth/api-keys", { name })).body.data.id as string);
    const day = 24 * 60 * 60_000;
    await h.db.apiKey.update({ where: { id: ids[0]! }, data: { revokedAt: new Date(Date.now() - 31 * day) } });
    await h.db.apiKey.update({ where: { id: ids[1]! }, data: { revokedAt: new Date(Date.now() - day) } });
    await pruneRevokedApiKeys(h.database);
    const left = await h.db.apiKey.findMany({ where: { userId: dan.id }, select: { name: true }, orderBy: { name: "asc" } });
    expect(left.map((key) => key.name)).toEqual(["live", "recently revoked", "test"]);
  });
});

describe("a key limited to some hubs", () => {
  let key: ReturnType<typeof clientFor>;
  let inTeam: string;
  let inOther: string;
  let personal: string;

  beforeAll(async () => {
    inTeam = (await push(ann, "release checklist for the team hub", team)).id;
    inOther = (await push(ann, "release checklist for the other hub", other)).id;
    personal = (await push(ann, "release checklist in my personal hub")).id;
    key = clientFor((await ann.post("/v1/auth/api-keys", { name: "team only", hub_id: team })).body.data.key);
  });

  test("pushes to its hub by default; any other hub is not found", async () => {
    expect((await push(key, "pushed without X-Hub-ID")).hub_id).toBe(team);
    const elsewhere = await key.post("/v1/memories", { content: "x" }, { headers: { "x-hub-id": ann.personalHubId } });
    expect(elsewhere.status).toBe(404);
  });

  test("reads, lists and hubs stop at the allowlist", async () => {
    expect((await key.get(`/v1/memories/${inTeam}`)).status).toBe(200);
    for (const id of [inOther, personal]) expect((await key.get(`/v1/memories/${id}`)).status).toBe(404);
    const listed = (await key.get("/v1/memories?limit=100")).body.data.memories.map((m: any) => m.hub_id);
    expect(new Set(listed)).toEqual(new Set([team]));
    expect((await key.get(`/v1/memories?hub_id=${other}`)).status).toBe(404);
    expect((await key.get("/v1/memories", { headers: { "x-hub-id": other } })).status).toBe(404);
    expect((await key.get(`/v1/hubs/${other}`)).status).toBe(404);
    const me = (await key.get("/v1/auth/me")).body.data;
    expect(me.hubs.map((m: any) => m.hub.id)).toEqual([team]);
    // Nor does it learn the id of the personal hub it cannot reach (as it cannot list the account's keys).
    expect(me.personal_hub_id).toBeNull();
    expect(me.credential).toMatchObject({ hub_scope_mode: "hub_allowlist", hub_ids: [team] });
    expect(me.user.can_create_hub).toBe(false);
  });

  test("batch operations and recall see only its hubs", async () => {
    const moved = await key.post("/v1/memories/batch-move", { ids: [inOther, personal], hub_id: team });
    expect(moved.body.data).toEqual({ moved: 0, skipped: [{ id: inOther, reason: "not_found" }, { id: personal, reason: "not_found" }] });
    expect((await key.post("/v1/memories/batch-move", { ids: [inTeam], hub_id: other })).status).toBe(404);
    const deleted = await key.post("/v1/memories/batch-delete", { ids: [inOther] });
    expect(deleted.body.data.deleted).toBe(0);
    expect(await h.db.memory.count({ where: { id: { in: [inOther, personal] } } })).toBe(2);
    const recall = await key.post("/v1/recall", { query: "release checklist", no_rerank: true, hub_ids: [other, team] });
    expect(recall.status).toBe(200);
    expect(recall.body.data.memories.map((m: any) => m.id)).not.toContain(inOther);
    expect(recall.body.data.memories.map((m: any) => m.id)).not.toContain(personal);
  });

  test("cannot manage the account", async () => {
    expect((await key.post("/v1/auth/api-keys", { name: "escalate" })).status).toBe(403);
    expect((await key.post("/v1/hubs", { name: "New hub" })).status).toBe(403);
    expect((await key.patch("/v1/auth/me", { display_name: "Mallory" })).status).toBe(403);
  });

  test("a hub deleted later is simply gone: the key never widens to every hub", async () => {
    const doomed = await h.teamHub(ann);
    const narrow = clientFor((await ann.post("/v1/auth/api-keys", { name: "doomed only", hub_id: doomed })).body.data.key);
    await h.db.hub.delete({ where: { id: doomed } });
    expect((await narrow.get("/v1/memories")).body.data.memories).toEqual([]);
    expect((await narrow.post("/v1/memories", { content: "where does this go?" })).status).toBe(404);
  });
});

describe("a read-only key", () => {
  let key: ReturnType<typeof clientFor>;
  let mine: string;

  beforeAll(async () => {
    mine = (await push(ann, "read-only keys can still read this")).id;
    key = clientFor((await ann.post("/v1/auth/api-keys", { name: "reader", scopes: ["read"] })).body.data.key);
  });

  test("reads and recalls", async () => {
    expect((await key.get(`/v1/memories/${mine}`)).status).toBe(200);
    expect((await key.get("/v1/memories")).status).toBe(200);
    expect((await key.post("/v1/recall", { query: "read-only keys", no_rerank: true })).status).toBe(200);
    expect((await key.get(`/v1/hubs/${team}/members`)).status).toBe(200);
  });

  test("acts as a viewer, and the hub list says so as hub detail does", async () => {
    const listed = (await key.get("/v1/hubs")).body.data as { hub: { id: string }; role: string }[];
    expect(listed.find((entry) => entry.hub.id === team)?.role).toBe("viewer");
    expect((await key.get(`/v1/hubs/${team}`)).body.data.role).toBe("viewer");
    // The same person's full key keeps the member's role.
    expect(((await ann.get("/v1/hubs")).body.data as { hub: { id: string }; role: string }[]).find((entry) => entry.hub.id === team)?.role).toBe("owner");
  });

  test("gets 403 on every write and changes nothing", async () => {
    const before = await h.db.memory.count({ where: { ownerId: ann.id } });
    const writes = [
      await key.post("/v1/memories", { content: "nope" }),
      await key.patch(`/v1/memories/${mine}`, { tags: ["x"] }),
      await key.delete(`/v1/memories/${mine}`),
      await key.post("/v1/memories/batch-delete", { ids: [mine] }),
      await key.post("/v1/memories/batch-move", { ids: [mine], hub_id: team }),
      await key.post("/v1/topics", { name: "nope", hub_id: team }),
      await key.patch(`/v1/hubs/${team}`, { name: "Renamed" }),
      await key.post("/v1/auth/api-keys", { name: "escalate" }),
    ];
    for (const res of writes) {
      expect(res.status, res.text).toBe(403);
      expect(res.body.error.message).toMatch(/read-only/);
    }
    expect(await h.db.memory.count({ where: { ownerId: ann.id } })).toBe(before);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: mine } })).tags).toEqual([]);
  });
});

describe("a key limited to some hubs and the account's credentials", () => {
  test("cannot list the account's keys or connected apps, which name hubs beyond its reach", async () => {
    const otherSlug = (await ann.get(`/v1/hubs/${other}`)).body.data.hub.slug as string;
    expect((await ann.post("/v1/auth/api-keys", { name: "other hub bot", hub_id: other })).status).toBe(201);
    const teamKey = clientFor((await ann.post("/v1/auth/api-keys", { name: "team hub bot", hub_id: team })).body.data.key);
    for (const path of ["/v1/auth/api-keys", "/v1/auth/oauth-grants"]) {
      const res = await teamKey.get(path);
      expect([res.status, res.body.error?.code], path).toEqual([403, "forbidden"]);
      expect(res.text).not.toContain(other);
      expect(res.text).not.toContain(otherSlug);
    }
    // A key for the whole account lists them, the other hub's key included.
    expect((await ann.get("/v1/auth/api-keys")).text).toContain(other);
    expect((await ann.get("/v1/auth/oauth-grants")).status).toBe(200);
  });
});

describe("PATCH /v1/auth/api-keys/{id}", () => {
  test("assigns an agent, clears it with \"\", marks a key standalone", async () => {
    const created = (await ann.post("/v1/auth/api-keys", { name: "script" })).body.data;
    const key = clientFor(created.key);
    expect((await ann.patch(`/v1/auth/api-keys/${created.id}`, { agent_name: "hermes" })).body.data).toEqual({ id: created.id, agent_name: "hermes", standalone: false });
    expect((await push(key, "attributed to hermes now")).source_agent).toBe("hermes");
    expect((await ann.patch(`/v1/auth/api-keys/${created.id}`, { agent_name: "" })).body.data.agent_name).toBe("");
    expect((await push(key, "no agent any more")).source_agent).toBeNull();
    expect((await ann.patch(`/v1/auth/api-keys/${created.id}`, { standalone: true })).body.data).toEqual({ id: created.id, agent_name: "", standalone: true });
    expect((await ann.get("/v1/auth/api-keys")).body.data.find((k: any) => k.id === created.id)).toMatchObject({ standalone: true, agent_name: "" });
    expect((await ann.patch(`/v1/auth/api-keys/${created.id}`, {})).status).toBe(400);
    expect((await bob.patch(`/v1/auth/api-keys/${created.id}`, { standalone: false })).status).toBe(404);
  });
});

describe("a key with agent_name", () => {
  test("its pushes carry source_agent = agent_name, whatever the body claims", async () => {
    const key = clientFor((await ann.post("/v1/auth/api-keys", { name: "cursor", agent_name: "cursor" })).body.data.key);
    expect((await push(key, "pushed by the cursor agent")).source_agent).toBe("cursor");
    const claimed = await key.post("/v1/memories", { content: "claims to be someone else", source_agent: "claude-code" });
    expect(claimed.body.data.source_agent).toBe("cursor");
    expect(claimed.headers.get("x-engram-warning")).toBe('source_agent ignored: this API key pushes as "cursor"');
    // A plain key keeps what the client sends.
    expect((await ann.post("/v1/memories", { content: "from a plain key", source_agent: "claude-code" })).body.data.source_agent).toBe("claude-code");
  });
});

describe("a key that creates keys passes on its limits", () => {
  test("a key for an agent, expiring tomorrow, makes only keys for that agent that expire by then, and cannot move any key off or onto an agent", async () => {
    const made = (await ann.post("/v1/auth/api-keys", { name: "cursor-1d", agent_name: "cursor", expires_in_days: 1 })).body.data;
    const agentKey = clientFor(made.key);
    const child = await agentKey.post("/v1/auth/api-keys", { name: "child" });
    expect(child.status, JSON.stringify(child.body)).toBe(201);
    expect(child.body.data.agent_name).toBe("cursor");
    expect(new Date(child.body.data.expires_at).getTime()).toBeLessThanOrEqual(new Date(made.expires_at).getTime());
    const longer = await agentKey.post("/v1/auth/api-keys", { name: "longer", expires_in_days: 365 });
    expect(new Date(longer.body.data.expires_at).getTime()).toBe(new Date(made.expires_at).getTime());
    expect((await agentKey.post("/v1/auth/api-keys", { name: "other agent", agent_name: "claude-code" })).status).toBe(403);
    const shed = await agentKey.patch(`/v1/auth/api-keys/${made.id}`, { agent_name: "" });
    expect(shed.status).toBe(403);
    expect((await h.db.apiKey.findUniqueOrThrow({ where: { id: made.id } })).agentName).toBe("cursor");
    // Nor can it take the agent off a key it made (disconnecting cursor would then miss that key),
    // or put a key of the user's under its agent (disconnecting cursor would then revoke it).
    expect((await agentKey.patch(`/v1/auth/api-keys/${child.body.data.id}`, { agent_name: "" })).status).toBe(403);
    expect((await agentKey.patch(`/v1/auth/api-keys/${child.body.data.id}`, { agent_name: "windsurf" })).status).toBe(403);
    const plain = (await ann.post("/v1/auth/api-keys", { name: "plain" })).body.data;
    expect((await agentKey.patch(`/v1/auth/api-keys/${plain.id}`, { agent_name: "cursor" })).status).toBe(403);
    expect((await h.db.apiKey.findUniqueOrThrow({ where: { id: child.body.data.id } })).agentName).toBe("cursor");
    expect((await h.db.apiKey.findUniqueOrThrow({ where: { id: plain.id } })).agentName).toBeNull();
    // What does not touch the agent still works.
    expect((await agentKey.patch(`/v1/auth/api-keys/${child.body.data.id}`, { standalone: true, agent_name: "cursor" })).status).toBe(200);
    // The user's own unrestricted key still re-attributes it, and makes keys without an expiry.
    expect((await ann.patch(`/v1/auth/api-keys/${made.id}`, { agent_name: "" })).status).toBe(200);
    expect((await ann.post("/v1/auth/api-keys", { name: "forever" })).body.data.expires_at).toBeNull();
  });
});
