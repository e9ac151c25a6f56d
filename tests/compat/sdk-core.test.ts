import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, loadSdk, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

// Memax's SDK, imported from its build, for each method of memories, recall, API keys and the
// account that maps to an endpoint Engram implements. Shapes are the SDK's types.ts.

let engram: Engram;
let ann: EngramUser;
let bob: EngramUser;
let Memax: Awaited<ReturnType<typeof loadSdk>>["Memax"];
let MemaxError: Awaited<ReturnType<typeof loadSdk>>["MemaxError"];
let sdk: any;
let team: string;

beforeAll(async () => {
  ({ Memax, MemaxError } = await loadSdk());
  engram = await startEngram();
  ann = await engram.user("Ann");
  bob = await engram.user("Bob");
  sdk = new Memax({ apiUrl: engram.url, apiKey: ann.key, maxRetries: 0 });
  // A team hub with Bob as contributor, made through the API (hub methods are tested with the hubs work).
  team = (await ann.api("POST", "/v1/hubs", { name: "Platform" })).body.data.id;
  // Bob joins through an invite (adding by user id needs a shared hub first).
  const invite = await ann.api("POST", `/v1/hubs/${team}/invites`, { role: "contributor" });
  expect(invite.status, JSON.stringify(invite.body)).toBe(201);
  expect((await bob.api("POST", `/v1/invites/${invite.body.data.token}/accept`)).status).toBe(200);
});
afterAll(async () => {
  await engram?.stop();
});

const isoTime = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe("memories", () => {
  let pushed: any;

  it("push sends every option (empty strings for unset ones) and gets a Memory", async () => {
    pushed = await sdk.memories.push("# Cache policy\n\nWe cache product pages for 5 minutes at the CDN edge.", {
      title: "Cache policy",
      tags: ["cdn", "performance"],
      sourceAgent: "claude-code",
      initiationType: "agent_proactive",
      sourcePath: "docs/cache.md",
      contentType: "markdown",
      projectContext: { repo: "github.com/acme/shop", working_dir: "/src/shop" },
      hubReason: "team-wide policy",
      hubId: team,
    });
    expect(pushed).toMatchObject({
      id: expect.any(String),
      hub_id: team,
      owner_id: ann.id,
      title: "Cache policy",
      content_type: "markdown",
      content_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      tags: ["cdn", "performance"],
      source: "sdk",
      source_agent: "claude-code",
      initiation_type: "agent_proactive",
      source_path: "docs/cache.md",
      hub_reason: "team-wide policy",
      project_context: { repo: "github.com/acme/shop", working_dir: "/src/shop" },
      version: 1,
      created_at: isoTime,
      updated_at: isoTime,
    });
    expect(["episodic", "semantic", "procedural", "rationale"]).toContain(pushed.kind);
    // The top-level shortcut is the same call.
    const viaClient = await sdk.push("Deploys freeze on Fridays after 15:00.");
    expect(viaClient).toMatchObject({ source: "sdk", hub_id: ann.personalHubId, source_agent: null });
  });

  it("push with a file_ref of an object that was never uploaded is refused with a clear error", async () => {
    const error = await sdk.memories
      .push("", { fileRef: { object_key: "u/1", filename: "a.pdf", content_type: "application/pdf", sha256: "b".repeat(64) } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MemaxError);
    expect(error).toMatchObject({ code: "invalid_request", status: 400 });
    expect(error.message).toMatch(/upload/i);
  });

  it("get, update, list with filters", async () => {
    const got = await sdk.memories.get(pushed.id);
    expect(got).toMatchObject({ id: pushed.id, content: expect.stringContaining("5 minutes"), attachments: [] });

    const updated = await sdk.memories.update(pushed.id, { title: "CDN cache policy", tags: ["cdn"], kind: "rationale" });
    expect(updated).toMatchObject({ id: pushed.id, title: "CDN cache policy", tags: ["cdn"], kind: "rationale" });

    const bobs = new Memax({ apiUrl: engram.url, apiKey: bob.key, maxRetries: 0 });
    const bobMemory = await bobs.memories.push("Bob's note: the staging VPN moved to WireGuard.", { hubId: team });

    const inTeam = await sdk.memories.list({ hubId: team, limit: 10 });
    expect(inTeam).toMatchObject({ total: 2, has_more: false, next_cursor: "" });
    expect(new Set(inTeam.memories.map((m: any) => m.id))).toEqual(new Set([pushed.id, bobMemory.id]));
    expect((await sdk.memories.list({ hubId: team, actor: bob.id })).memories.map((m: any) => m.id)).toEqual([bobMemory.id]);
    expect((await sdk.memories.list({ kind: "rationale" })).memories.map((m: any) => m.id)).toEqual([pushed.id]);
    expect((await sdk.memories.list({ createdAfter: new Date(Date.now() + 60_000).toISOString() })).memories).toEqual([]);
    const paged = await sdk.memories.list({ limit: 1, sort: "newest" });
    expect(paged.has_more).toBe(true);
    const next = await sdk.memories.list({ limit: 1, cursor: paged.next_cursor });
    expect(next.memories[0].id).not.toBe(paged.memories[0].id);
  });

  it("recall answers RecallResult", async () => {
    await eventually(async () => {
      const list = await ann.api("GET", "/v1/memories?limit=100");
      return list.body.data.memories.every((m: any) => m.processing_status === "done");
    }, 90_000, "processing");
    const result = await sdk.recall("how long do we cache product pages at the CDN", { limit: 3, noRerank: true, workingDir: "/src/shop" });
    expect(result.memories.length).toBeGreaterThan(0);
    expect(result.memories[0]).toMatchObject({
      id: pushed.id,
      title: "CDN cache policy",
      chunk_content: expect.stringContaining("5 minutes"),
      heading_chain: expect.any(String),
      relevance_score: expect.any(Number),
      kind: "rationale",
      stability: expect.any(String),
      source: "sdk",
      age: "just now",
    });
    expect(result.query_metadata).toMatchObject({ intent: expect.any(String), total_candidates: expect.any(Number), latency_ms: expect.any(Number) });
    const viaResource = await sdk.memories.recall("WireGuard VPN", { hubId: team, limit: 5 });
    expect(viaResource.memories[0].title).toMatch(/WireGuard/);
  });

  it("search answers SearchResult[] (words only), narrowed by hubId", async () => {
    const found = await sdk.memories.search("CDN cache product pages", { limit: 5 });
    expect(found[0]).toMatchObject({ memory_id: pushed.id, title: "CDN cache policy", snippet: expect.stringContaining("5 minutes at the CDN edge"), kind: "rationale", stability: expect.any(String), hub_id: team, hub_name: "Platform" });
    // A half-typed word finds the title.
    expect((await sdk.memories.search("CDN cach")).map((r: any) => r.memory_id)).toContain(pushed.id);
    const inTeam = await sdk.memories.search("WireGuard", { hubId: team });
    expect(inTeam.length).toBeGreaterThan(0);
    expect(inTeam.every((r: any) => r.hub_id === team)).toBe(true);
    expect(await sdk.memories.search("zeppelin")).toEqual([]);
  });

  it("bar.search answers BarSearchResult: memories, topics and hubs in one response", async () => {
    const bar = await sdk.bar.search("platf");
    expect(bar).toMatchObject({ query: "platf", memories: expect.any(Array), topics: expect.any(Array) });
    expect(bar.hubs).toContainEqual({ id: team, name: "Platform" });
    const cdn = await sdk.bar.search("CDN cache", { hubId: team, limit: 3 });
    expect(cdn.memories[0]).toMatchObject({ memory_id: pushed.id, hub_id: team });
    expect(cdn.hubs).toEqual([]);
    expect(await sdk.bar.search("")).toEqual({ query: "", memories: [], topics: [], hubs: [] });
  });

  it("related answers [{ memory, similarity }]", async () => {
    const similar = await sdk.push("# CDN edge caching\n\nProduct pages are cached at the CDN edge; purge on deploy.", { hubId: team });
    await eventually(async () => (await ann.api("GET", `/v1/memories?hub_id=${team}`)).body.data.memories.every((m: any) => m.processing_status === "done"), 90_000);
    const related = await sdk.memories.related(pushed.id);
    expect(related.length).toBeLessThanOrEqual(5);
    expect(related[0]).toMatchObject({ memory: { id: similar.id, hub_id: team }, similarity: expect.any(Number) });
    expect(related.map((r: any) => r.memory.id)).not.toContain(pushed.id);
  });

  it("memories.share answers the copy (a Memory) in the target hub", async () => {
    const copy = await sdk.memories.share(pushed.id, ann.personalHubId);
    expect(copy).toMatchObject({ title: "CDN cache policy", hub_id: ann.personalHubId, kind: "rationale" });
    expect(copy.id).not.toBe(pushed.id);
    expect((await sdk.memories.share(pushed.id, ann.personalHubId)).id).toBe(copy.id);
    await expect(sdk.memories.share(pushed.id, team)).rejects.toMatchObject({ status: 400 });
  });

  it("trackAccessed (what `memax show` sends after get) makes one open count once; alone it counts", async () => {
    const count = async (id: string) => (await ann.api("GET", "/v1/memories?limit=100")).body.data.memories.find((m: any) => m.id === id).access_count;
    const opened = await sdk.push("opened through the SDK");
    await sdk.memories.get(opened.id);
    await sdk.memories.trackAccessed(opened.id);
    expect(await count(opened.id)).toBe(1);
    const signalled = await sdk.push("signalled without a read");
    await sdk.memories.trackAccessed(signalled.id);
    expect(await count(signalled.id)).toBe(1);
    const error = await sdk.memories.trackAccessed("01900000-0000-7000-8000-000000000000").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MemaxError);
    expect(error).toMatchObject({ code: "not_found", status: 404 });
  });

  it("batchMove and batchDelete answer { moved|deleted, skipped }", async () => {
    const a = await sdk.push("temporary note one");
    const b = await sdk.push("temporary note two");
    const moved = await sdk.memories.batchMove([a.id, b.id, "01900000-0000-7000-8000-000000000000"], { hubId: team });
    expect(moved).toEqual({ moved: 2, skipped: [{ id: "01900000-0000-7000-8000-000000000000", reason: "not_found" }] });
    expect((await sdk.memories.get(a.id)).hub_id).toBe(team);
    const deleted = await sdk.memories.batchDelete([a.id, b.id]);
    expect(deleted).toEqual({ deleted: 2, skipped: [] });
    expect((await ann.api("GET", `/v1/memories/${a.id}`)).status).toBe(404);
  });

  it("delete resolves, then the memory is gone", async () => {
    const doomed = await sdk.push("delete me via the SDK");
    await expect(sdk.memories.delete(doomed.id)).resolves.toBeUndefined();
    const error = await sdk.memories.get(doomed.id).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "not_found", status: 404 });
  });
});

describe("auth and account", () => {
  it("me answers MeResponse", async () => {
    const me = await sdk.auth.me();
    expect(me.user).toMatchObject({
      id: ann.id,
      email: ann.email,
      name: "Ann",
      display_name: "Ann",
      plan: "self_hosted",
      personal_plan_id: "self_hosted",
      can_create_hub: true,
      created_at: isoTime,
      updated_at: isoTime,
    });
    expect(me.hubs).toEqual(
      expect.arrayContaining([
        { hub: expect.objectContaining({ id: ann.personalHubId, hub_type: "personal" }), role: "owner", memory_count: expect.any(Number) },
        { hub: expect.objectContaining({ id: team, name: "Platform", hub_type: "team" }), role: "owner", memory_count: expect.any(Number) },
      ]),
    );
    expect(me.usage).toMatchObject({ user_id: ann.id, push_count: expect.any(Number), recall_count: expect.any(Number), ask_count: expect.any(Number) });
    expect(me.connected_providers).toEqual([]);
  });

  it("boards: requestDecision, listForHub, getBoard, slotHistory and resolveSlot on the hub's one board", async () => {
    const { slot } = await sdk.boards.requestDecision(team, { question: "Which CDN for the docs site?", options: ["Fastly", "Cloudflare"] });
    expect(slot).toMatchObject({ slot_key: expect.stringMatching(/^decision:/), kind: "decision_gate", state: "fresh" });
    const { boards } = await sdk.boards.listForHub(team);
    expect(boards).toEqual([expect.objectContaining({ id: team, hub_id: team, kind: "system" })]);
    const board = await sdk.boards.getBoard(team, boards[0].id);
    expect(board.slots.map((s: any) => s.slot_key)).toContain(slot.slot_key);
    expect(await sdk.boards.slotHistory(team, slot.slot_key)).toEqual({ versions: [] });
    const chosen = await sdk.boards.resolveSlot(team, slot.slot_key, "choose", undefined, "Cloudflare");
    expect(chosen.slot).toMatchObject({ state: "resolved", payload: { chosen: expect.objectContaining({ label: "Cloudflare" }) } });
  });

  it("listIdentities answers AuthIdentity[]; unlinkProvider of nothing linked is a 404", async () => {
    expect(await sdk.auth.listIdentities()).toEqual([]);
    await expect(sdk.auth.unlinkProvider("github")).rejects.toMatchObject({ status: 404 });
  });

  it("updateProfile renames", async () => {
    expect(await sdk.auth.updateProfile("Ann Lovelace")).toMatchObject({ status: "updated", display_name: "Ann Lovelace" });
    expect((await sdk.auth.me()).user.display_name).toBe("Ann Lovelace");
  });

  it("createKey, listKeys, updateKey, revokeKey with scopes, hubs and an agent", async () => {
    const key = await sdk.auth.createKey({ name: "team agent", hubId: team, agentName: "cursor", scopes: ["read", "write"], trustLevel: "elevated", expiresInDays: 7 });
    expect(key).toMatchObject({
      name: "team agent",
      key: expect.stringMatching(/^egk_/),
      prefix: expect.any(String),
      scope: expect.any(String),
      hub_id: team,
      hub_ids: [team],
      hub_scope_mode: "hub_allowlist",
      trust_level: "elevated",
      expires_at: isoTime,
      created_at: isoTime,
    });
    const asAgent = new Memax({ apiUrl: engram.url, apiKey: key.key, maxRetries: 0 });
    const memory = await asAgent.push("pushed by the cursor agent's key");
    expect(memory).toMatchObject({ hub_id: team, source_agent: "cursor" });
    const personal = await sdk.push("only in Ann's personal hub");
    const outside = await asAgent.memories.get(personal.id).catch((e: unknown) => e);
    expect(outside).toMatchObject({ status: 404 });

    const keys = await sdk.auth.listKeys();
    const listed = keys.find((k: any) => k.id === key.id);
    expect(listed).toMatchObject({ name: "team agent", scopes: ["read", "write"], scope: key.scope, hub_id: team, agent_name: "cursor", last_used: isoTime });
    expect(listed).not.toHaveProperty("key");

    expect(await sdk.auth.updateKey(key.id, { agent_name: "" })).toEqual({ id: key.id, agent_name: "", standalone: false });
    expect(await sdk.auth.updateKey(key.id, { standalone: true })).toEqual({ id: key.id, agent_name: "", standalone: true });
    expect((await asAgent.push("now pushed without an agent")).source_agent).toBeNull();

    expect(await sdk.auth.revokeKey(key.id)).toEqual({ revoked: true, skipped: [] });
    expect(await sdk.auth.revokeKey(key.id)).toEqual({ revoked: false, skipped: [{ id: key.id, reason: "not_found" }] });
    expect((await asAgent.push("after revocation").catch((e: unknown) => e)).status).toBe(401);
  });

  it("agents.list, update and disconnect answer ConnectedAgentWithStats and DisconnectAgentResult", async () => {
    const key = await sdk.auth.createKey({ name: "windsurf on the laptop", agentName: "windsurf" });
    const asWindsurf = new Memax({ apiUrl: engram.url, apiKey: key.key, maxRetries: 0 });
    await asWindsurf.push("pushed by windsurf for the agents list");
    const windsurf = (await sdk.agents.list()).find((a: any) => a.agent_name === "windsurf");
    expect(windsurf).toMatchObject({ id: expect.any(String), owner_id: expect.any(String), display_name: "Windsurf", icon: "", status: "active", created_at: isoTime, updated_at: isoTime, key_count: 1, config_count: 0, memory_count: 1, needs_reconnect: false, last_active_at: isoTime });
    expect(await sdk.agents.update("windsurf", { displayName: "Windsurf (laptop)", icon: "🤖" })).toMatchObject({ id: windsurf.id, display_name: "Windsurf (laptop)", icon: "🤖" });
    // The SDK sends display_name: undefined for an icon-only change: the name stays.
    expect(await sdk.agents.update("windsurf", { icon: "💻" })).toMatchObject({ display_name: "Windsurf (laptop)", icon: "💻" });
    expect(await sdk.agents.disconnect("windsurf")).toEqual({ disconnected: true, keys_revoked: 1, configs_tombstoned: 0, skipped: [] });
    expect((await asWindsurf.push("after the disconnect").catch((e: unknown) => e)).status).toBe(401);
    expect((await sdk.agents.list()).map((a: any) => a.agent_name)).not.toContain("windsurf");
    expect(await sdk.agents.disconnect("windsurf")).toMatchObject({ disconnected: false, skipped: [{ id: "windsurf", reason: "not_found" }] });
  });
});
