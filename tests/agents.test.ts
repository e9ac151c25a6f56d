import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentId, MAX_AGENTS, MAX_ORPHAN_RENAMES } from "@/lib/agents/connected-agents.ts";
import { clientFor, createHarness, type Client, type Harness } from "./support/harness.ts";

// Connected agents (Memax's agents.list / update / disconnect): derived from the caller's keys,
// synced configs and memories; a rename is stored, a disconnect revokes and deletes in one go.

let h: Harness;
let ann: Client;
let bob: Client;
let claude: ReturnType<typeof clientFor>;

async function key(who: Client, agentName: string) {
  const res = await who.post("/v1/auth/api-keys", { name: `${agentName} key`, agent_name: agentName });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as { id: string; key: string };
}

const byName = (list: { agent_name: string; id: string }[], name: string) => list.find((a) => a.agent_name === name);

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  claude = clientFor((await key(ann, "claude-code")).key);
  await key(ann, "claude-code");
  const cursor = await key(ann, "cursor");
  await h.db.apiKey.update({ where: { id: cursor.id }, data: { expiresAt: new Date(Date.now() - 60_000) } });
  await key(bob, "claude-code");
  for (const n of [1, 2, 3]) expect((await claude.post("/v1/memories", { content: `Claude's note ${n} on the deploy freeze.` })).status).toBe(201);
  expect((await ann.post("/v1/memories", { content: "Ann's own note." })).status).toBe(201);
  const config = { agent: "claude-code", scope: "global", content: "# Rules\n" };
  expect((await ann.put("/v1/configs", { ...config, file_path: "CLAUDE.md" })).status).toBe(201);
  expect((await ann.put("/v1/configs", { ...config, file_path: "settings.json" })).status).toBe(201);
  expect((await ann.put("/v1/configs", { agent: "codex", scope: "global", file_path: "AGENTS.md", content: "x" })).status).toBe(201);
});
afterAll(async () => {
  await h?.close();
});

describe("GET /v1/agents", () => {
  it("lists the caller's agents with their keys, configs and memories, and nobody else's", async () => {
    const res = await ann.get("/v1/agents");
    expect(res.status).toBe(200);
    const list = res.body.data as { agent_name: string; id: string }[];
    expect(list.map((a) => a.agent_name).sort()).toEqual(["claude-code", "codex", "cursor"]);
    expect(byName(list, "claude-code")).toMatchObject({
      owner_id: ann.id,
      display_name: "Claude Code",
      icon: "",
      status: "active",
      key_count: 2,
      config_count: 2,
      memory_count: 3,
      needs_reconnect: false,
      last_active_at: expect.any(String),
    });
    // An expired key still names its agent, which now needs reconnecting; configs alone do too.
    expect(byName(list, "cursor")).toMatchObject({ status: "disconnected", key_count: 0, config_count: 0, needs_reconnect: true });
    expect(byName(list, "codex")).toMatchObject({ key_count: 0, config_count: 1, memory_count: 0, needs_reconnect: true });
    // The most recently active first (Codex synced last); an agent never active comes last.
    expect(list.map((a) => a.agent_name)).toEqual(["codex", "claude-code", "cursor"]);
    const bobs = (await bob.get("/v1/agents")).body.data;
    expect(bobs).toHaveLength(1);
    expect(bobs[0]).toMatchObject({ agent_name: "claude-code", key_count: 1, config_count: 0, memory_count: 0 });
    expect(bobs[0].id).not.toBe(byName(list, "claude-code")!.id);
  });
});

describe("an agent's memories in a hub being deleted", () => {
  it("are not counted in memory_count, as /v1/usage leaves them out", async () => {
    const cat = await h.user("Cat");
    const team = await h.teamHub(cat);
    const agent = clientFor((await key(cat, "claude-code")).key);
    expect((await agent.post("/v1/memories", { content: "Kept in the personal hub." })).status).toBe(201);
    for (const n of [1, 2]) expect((await agent.post("/v1/memories", { content: `Team note ${n}.` }, { headers: { "x-hub-id": team } })).status).toBe(201);
    expect(byName((await cat.get("/v1/agents")).body.data, "claude-code")).toMatchObject({ memory_count: 3 });
    // Deleted, its memories not purged yet (a large hub's rest waits for the sweep, up to 10 minutes).
    await h.db.hub.update({ where: { id: team }, data: { deletedAt: new Date() } });
    await h.db.hubMember.deleteMany({ where: { hubId: team } });
    expect(await h.db.memory.count({ where: { hubId: team } })).toBe(2);
    expect((await cat.get("/v1/usage")).body.data.memory_count).toBe(1);
    expect(byName((await cat.get("/v1/agents")).body.data, "claude-code")).toMatchObject({ memory_count: 1 });
  });
});

describe("an agent's memories in a hub its user left", () => {
  it("are not counted in memory_count, as /v1/usage leaves them out", async () => {
    const dee = await h.user("Dee");
    const eli = await h.user("Eli");
    const team = await h.teamHub(eli, [[dee, "contributor"]]);
    const agent = clientFor((await key(dee, "claude-code")).key);
    expect((await agent.post("/v1/memories", { content: "Dee's own note." })).status).toBe(201);
    for (const n of [1, 2]) expect((await agent.post("/v1/memories", { content: `Dee's team note ${n}.` }, { headers: { "x-hub-id": team } })).status).toBe(201);
    expect(byName((await dee.get("/v1/agents")).body.data, "claude-code")).toMatchObject({ memory_count: 3 });
    expect((await dee.post(`/v1/hubs/${team}/leave`)).status).toBe(200);
    // Still theirs by name, in a hub they can no longer read.
    expect(await h.db.memory.count({ where: { hubId: team, ownerId: dee.id } })).toBe(2);
    expect((await dee.get("/v1/usage")).body.data.memory_count).toBe(1);
    expect(byName((await dee.get("/v1/agents")).body.data, "claude-code")).toMatchObject({ memory_count: 1 });
  });

  it("still make the agent's last activity: its latest write in the hub left keeps it first in the list", async () => {
    const fay = await h.user("Fay");
    const gus = await h.user("Gus");
    const team = await h.teamHub(gus, [[fay, "contributor"]]);
    const busy = await key(fay, "claude-code");
    const idle = await key(fay, "cursor");
    const days = (n: number) => new Date(Date.now() - n * 86_400_000);
    expect((await clientFor(idle.key).post("/v1/memories", { content: "Fay's cursor note." })).status).toBe(201);
    expect((await clientFor(busy.key).post("/v1/memories", { content: "Fay's own claude note." })).status).toBe(201);
    const teamNote = await clientFor(busy.key).post("/v1/memories", { content: "Fay's team note." }, { headers: { "x-hub-id": team } });
    expect(teamNote.status).toBe(201);
    // Before the team write, claude-code was idle for days and cursor used since; the team write is the latest of all.
    await h.db.apiKey.updateMany({ where: { id: busy.id }, data: { lastUsedAt: days(5) } });
    await h.db.apiKey.updateMany({ where: { id: idle.id }, data: { lastUsedAt: days(2) } });
    await h.db.memory.updateMany({ where: { ownerId: fay.id, hubId: { not: team } }, data: { createdAt: days(5) } });
    const at = days(1);
    await h.db.memory.update({ where: { id: teamNote.body.data.id }, data: { createdAt: at } });
    expect((await fay.post(`/v1/hubs/${team}/leave`)).status).toBe(200);
    const list = (await fay.get("/v1/agents")).body.data as { agent_name: string; last_active_at: string; updated_at: string; memory_count: number }[];
    expect(list.map((a) => a.agent_name)).toEqual(["claude-code", "cursor"]);
    expect(list[0]).toMatchObject({ last_active_at: at.toISOString(), updated_at: at.toISOString(), memory_count: 1 });
  });
});

describe("PATCH /v1/agents/{agent_name}", () => {
  it("renames an agent and sets its icon, keeps the id, and goes back to the derived name on \"\"", async () => {
    const before = byName((await ann.get("/v1/agents")).body.data, "claude-code")!;
    const res = await ann.patch("/v1/agents/claude-code", { display_name: "Claude (work laptop)", icon: "🤖" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ id: before.id, agent_name: "claude-code", display_name: "Claude (work laptop)", icon: "🤖", key_count: 2 });
    expect(byName((await ann.get("/v1/agents")).body.data, "claude-code")).toMatchObject({ display_name: "Claude (work laptop)", icon: "🤖" });
    const reset = await ann.patch("/v1/agents/claude-code", { display_name: "" });
    expect(reset.body.data).toMatchObject({ display_name: "Claude Code", icon: "🤖" });
    expect(await h.db.connectedAgent.count({ where: { ownerId: ann.id } })).toBe(1);
  });

  it("refuses an agent the caller does not have, an empty body and a long name", async () => {
    expect((await ann.patch("/v1/agents/windsurf", { icon: "x" })).status).toBe(404);
    expect((await ann.patch("/v1/agents/claude-code", {})).status).toBe(400);
    expect((await ann.patch("/v1/agents/claude-code", { display_name: "x".repeat(101) })).status).toBe(400);
    expect((await claude.patch("/v1/agents/claude-code", { icon: "x" })).status).toBe(200);
    expect(await h.db.connectedAgent.count({ where: { ownerId: bob.id } })).toBe(0);
  });
});

describe("an agent name no key or config can carry", () => {
  it("a NUL in the path is not found on PATCH and skipped on DELETE, not a 500", async () => {
    const patched = await ann.patch("/v1/agents/claude%00code", { icon: "x" });
    expect([patched.status, patched.body.error?.code]).toEqual([404, "not_found"]);
    const deleted = await ann.delete("/v1/agents/claude%00code");
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body.data).toEqual({ disconnected: false, keys_revoked: 0, configs_tombstoned: 0, skipped: [{ id: "claude\u0000code", reason: "not_found" }] });
  });
});

describe("DELETE /v1/agents/{agent_name}", () => {
  it("revokes the agent's keys and deletes its configs (restorable), keeps its memories, and is idempotent", async () => {
    const res = await ann.delete("/v1/agents/claude-code");
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ disconnected: true, keys_revoked: 2, configs_tombstoned: 2, skipped: [] });
    // The agent's key stops working at once.
    expect((await claude.get("/v1/memories")).status).toBe(401);
    expect((await ann.get("/v1/configs?agent=claude-code")).body.data.configs).toHaveLength(0);
    const deleted = (await ann.get("/v1/configs/deleted")).body.data.configs as { agent: string }[];
    expect(deleted.filter((c) => c.agent === "claude-code")).toHaveLength(2);
    expect(await h.db.memory.count({ where: { ownerId: ann.id, sourceAgent: "claude-code" } })).toBe(3);
    expect(await h.db.connectedAgent.count({ where: { ownerId: ann.id } })).toBe(0);
    expect(byName((await ann.get("/v1/agents")).body.data, "claude-code")).toBeUndefined();
    // Bob's agent of the same name is untouched.
    expect(byName((await bob.get("/v1/agents")).body.data, "claude-code")).toMatchObject({ key_count: 1 });

    const again = await ann.delete("/v1/agents/claude-code");
    expect(again.body.data).toEqual({ disconnected: false, keys_revoked: 0, configs_tombstoned: 0, skipped: [{ id: "claude-code", reason: "not_found" }] });
  });
});

describe("renames of agents nothing names any more", () => {
  it("do not pile up: renaming agent after agent and deleting each one's config keeps the newest orphans only, and the list reads a bounded number", async () => {
    const cyd = await h.user("Cyd");
    // The renames earlier cycles (rename an agent only a config names, delete the config) left behind.
    const base = Date.now() - 3_600_000;
    await h.db.connectedAgent.createMany({
      data: Array.from({ length: MAX_ORPHAN_RENAMES + 50 }, (_, i) => ({ id: agentId(cyd.id, `old-${i}`), ownerId: cyd.id, agentName: `old-${i}`, displayName: `Old ${i}`, createdAt: new Date(base + i * 1000), updatedAt: new Date(base + i * 1000) })),
    });
    for (const name of ["tool-a", "tool-b"]) {
      const put = await cyd.put("/v1/configs", { agent: name, scope: "global", file_path: "RULES.md", content: "x" });
      expect(put.status, put.text).toBe(201);
      expect((await cyd.patch(`/v1/agents/${name}`, { display_name: `My ${name}` })).status).toBe(200);
      expect((await cyd.delete(`/v1/configs/${put.body.data.id}`)).status).toBe(200);
    }
    const rows = await h.db.connectedAgent.findMany({ where: { ownerId: cyd.id }, select: { agentName: true } });
    expect(rows.length).toBeLessThanOrEqual(MAX_ORPHAN_RENAMES + 1);
    // The most recent renames stay (and are listed); the oldest went.
    const names = rows.map((r) => r.agentName);
    expect(names).toEqual(expect.arrayContaining(["tool-a", "tool-b", `old-${MAX_ORPHAN_RENAMES + 49}`]));
    expect(names).not.toContain("old-0");
    const list = (await cyd.get("/v1/agents")).body.data as { agent_name: string; id: string }[];
    expect(list).toHaveLength(MAX_AGENTS);
    expect(byName(list, "tool-b")).toMatchObject({ display_name: "My tool-b", config_count: 0 });
  });
});
