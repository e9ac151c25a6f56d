import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { dueHubs, runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { claimDreamRun, executeDreamRun } from "@/lib/dreams/run-dream.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { contentHash } from "@/lib/memories/create-memory.ts";
import { newId } from "@/lib/ids.ts";
import { indexMemories } from "./recall-helpers.ts";
import { backdateMemories } from "./support/backdate-memories.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";
import { startFakeOpenAiChat, type FakeOpenAiChat } from "./support/openai-chat-fake.ts";
import { stalledLock } from "./support/stalled-lock.ts";
import { longestWith, readSpy } from "./support/read-spy.ts";

// Dreams with a chat model (issue 15): merges rewrite the kept memory to hold
// both, new topics are named by the model; any model failure falls back.

const DUP_OLD = "Use pnpm, not npm, for installing dependencies in the web repo.";
const DUP_NEW = "In the web repo we install dependencies with pnpm instead of npm.";
const K8S = [
  "Kubernetes pods in the cluster are autoscaled with the horizontal pod autoscaler on CPU.",
  "Each Kubernetes deployment sets pod resource requests and limits for CPU and memory.",
  "Kubernetes pod logs are shipped from the cluster to Loki by a DaemonSet.",
  "Restart a stuck Kubernetes pod with kubectl rollout restart on its deployment.",
];
const DAY = 86_400_000;
const PAIR = ["Run the database migrations with npm run migrate before deploying the API.", "Before deploying the API we run the database migrations with npm run migrate."];

/** The fake model's merge: the newer note, then the older one, read back from the prompt it was sent. */
function fakeMerge(body: any): { content: string } {
  const prompt: string = body.messages.at(-1).content;
  const [, older, newer] = /OLDER NOTE\n[\s\S]*?Content:\n([\s\S]*?)\n\nNEWER NOTE\n[\s\S]*?Content:\n([\s\S]*)$/.exec(prompt) ?? [];
  return { content: `${newer} Also noted earlier: ${older}` };
}

/** The fake model's merge while a test sets it (fakeMerge otherwise). */
let mergeReply: ((body: any) => { content: string } | Promise<{ content: string }>) | undefined;
let h: Harness;
let owner: Client;
let fake: FakeOpenAiChat;
const saved = { ...process.env };

beforeAll(async () => {
  fake = await startFakeOpenAiChat((schema, body) =>
    schema === "merged_memory"
      ? (mergeReply ?? fakeMerge)(body)
      : schema === "topic_name"
        ? { name: "Kubernetes operations" }
        : schema === "memory_classification"
          ? { kind: "semantic", stability: "evolving" }
          : { summary: "A note." },
  );
  process.env.ENGRAM_CHAT_MODEL = "gpt-fake";
  process.env.OPENAI_API_KEY = "sk-test";
  process.env.OPENAI_BASE_URL = fake.url;
  h = await createHarness();
  owner = await h.user("Owner");
});
afterEach(() => {
  fake.mode = "ok";
  mergeReply = undefined;
  for (const key of ["ENGRAM_QUOTA_USER_BYTES", "ENGRAM_QUOTA_HUB_BYTES"]) delete process.env[key];
  delete process.env.ENGRAM_DREAM_MODEL_TIMEOUT_MS;
});
afterAll(async () => {
  for (const key of ["ENGRAM_CHAT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"]) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
  await h?.close();
  await fake?.close();
});

/**
 * A new hub with two merge pairs (DUP_OLD / DUP_NEW, then PAIR), written ten days ago a minute apart
 * and embedded: a run merges both, the newer of each (ids[1], ids[3]) kept.
 */
async function seedTwoMerges(): Promise<{ hubId: string; ids: string[] }> {
  const hubId = await h.teamHub(owner);
  const ids: string[] = [];
  const base = Date.now() - 10 * DAY;
  for (const [i, content] of [DUP_OLD, DUP_NEW, ...PAIR].entries()) {
    ids.push((await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } })).body.data.id);
    const at = new Date(base + i * 60_000);
    await backdateMemories(h.db, ids[i]!, { createdAt: at, updatedAt: at });
  }
  await indexMemories(h.db, ids);
  return { hubId, ids };
}

async function seedAndRun() {
  const hubId = await h.teamHub(owner);
  const ids: string[] = [];
  const base = Date.now() - 10 * DAY;
  for (const [i, content] of [DUP_OLD, DUP_NEW, ...K8S].entries()) {
    const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    ids.push(res.body.data.id);
    const at = new Date(base + i * 60_000);
    await backdateMemories(h.db, res.body.data.id, { createdAt: at, updatedAt: at });
  }
  await indexMemories(h.db, ids);
  fake.requests.length = 0;
  const res = await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
  expect(res.status, res.text).toBe(202);
  const runId: string = res.body.data.run_id;
  expect(await runDreamRunOnce(h.db, runId)).toBe(true);
  const [older, newer, k8s] = ids as [string, string, string];
  return { hubId, runId, older, newer, k8s };
}

const memory = (id: string) => h.db.memory.findUniqueOrThrow({ where: { id } });
const schemasSent = () => fake.requests.map((r) => r.response_format?.json_schema?.name);

describe("dreams with a chat model (a local fake of the OpenAI API)", () => {
  it("a merge rewrites the kept memory to hold both; undo restores both memories exactly", async () => {
    const { runId, older, newer, k8s } = await seedAndRun();
    const merged = `${DUP_NEW} Also noted earlier: ${DUP_OLD}`;
    expect(await memory(older)).toMatchObject({ state: "archived", supersededBy: newer, content: DUP_OLD });
    const kept = await memory(newer);
    expect(kept).toMatchObject({ state: "active", content: merged, contentHash: contentHash(merged), version: 2 });
    // The prompt held both memories whole, and the call was bounded.
    const mergeRequest = fake.requests.find((r) => r.response_format?.json_schema?.name === "merged_memory");
    expect(mergeRequest.messages.at(-1).content).toContain(DUP_OLD);
    expect(mergeRequest.messages.at(-1).content).toContain(DUP_NEW);
    expect(mergeRequest.max_tokens ?? mergeRequest.max_completion_tokens).toBeGreaterThan(0);

    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge" } });
    expect(action.details).toMatchObject({ kept_id: newer, archived_id: older, rewritten: true, model: "gpt-fake", original_content: DUP_NEW, original_content_hash: contentHash(DUP_NEW) });

    // The new topic is named by the model.
    const topic = await h.db.topic.findUniqueOrThrow({ where: { id: (await memory(k8s)).topicId! } });
    expect(topic.name).toBe("Kubernetes operations");

    const undone = await owner.post(`/v1/dreams/actions/${action.id}/undo`);
    expect(undone.status, undone.text).toBe(200);
    expect(await memory(older)).toMatchObject({ state: "active", supersededBy: null, content: DUP_OLD });
    expect(await memory(newer)).toMatchObject({ state: "active", content: DUP_NEW, contentHash: contentHash(DUP_NEW) });
  }, 180_000);

  it("a merge and its undo drop the kept memory's summary of the text it held before", async () => {
    const { hubId, ids } = await seedTwoMerges();
    const kept = ids[1]!;
    // As the summarise step wrote it for the kept memory's own text.
    await h.db.memory.update({ where: { id: kept }, data: { summary: "Summary of the newer pnpm note." } });
    const runId: string = (await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
    expect(await runDreamRunOnce(h.db, runId)).toBe(true);
    expect(await memory(kept)).toMatchObject({ content: `${DUP_NEW} Also noted earlier: ${DUP_OLD}`, version: 2 });
    expect((await owner.get(`/v1/memories/${kept}`, { headers: { "x-hub-id": hubId } })).body.data.summary).toBe("");

    await h.db.memory.update({ where: { id: kept }, data: { summary: "Summary of the merged note, quoting the older one." } });
    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge", details: { path: ["kept_id"], equals: kept } } });
    expect((await owner.post(`/v1/dreams/actions/${action.id}/undo`)).status).toBe(200);
    expect(await memory(kept)).toMatchObject({ content: DUP_NEW, version: 3 });
    expect((await owner.get(`/v1/memories/${kept}`, { headers: { "x-hub-id": hubId } })).body.data.summary).toBe("");
  }, 180_000);

  it("undo gives the kept memory back the time its own text was written, so the next run keeps by it", async () => {
    const { hubId, ids } = await seedTwoMerges();
    const kept = ids[1]!;
    const written = (await memory(kept)).contentChangedAt.toISOString();
    const runId: string = (await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
    expect(await runDreamRunOnce(h.db, runId)).toBe(true);
    expect((await memory(kept)).contentChangedAt.toISOString()).not.toBe(written);
    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge", details: { path: ["kept_id"], equals: kept } } });
    expect((await owner.post(`/v1/dreams/actions/${action.id}/undo`)).status).toBe(200);
    const restored = await memory(kept);
    expect(restored.content).toBe(DUP_NEW);
    // Its text is the one written ten days ago, not a change made by the undo: a newer duplicate of it wins the next keep choice.
    expect(restored.contentChangedAt.toISOString()).toBe(written);
  }, 180_000);

  it("undo keeps the time of a title edit made after the merge", async () => {
    const { hubId, ids } = await seedTwoMerges();
    const kept = ids[1]!;
    const runId: string = (await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
    expect(await runDreamRunOnce(h.db, runId)).toBe(true);
    expect((await owner.patch(`/v1/memories/${kept}`, { title: "pnpm in the web repo" })).status).toBe(200);
    const retitled = (await memory(kept)).contentChangedAt.toISOString();
    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge", details: { path: ["kept_id"], equals: kept } } });
    expect((await owner.post(`/v1/dreams/actions/${action.id}/undo`)).status).toBe(200);
    expect(await memory(kept)).toMatchObject({ content: DUP_NEW, title: "pnpm in the web repo" });
    expect((await memory(kept)).contentChangedAt.toISOString()).toBe(retitled);
  }, 180_000);

  it("undo after the kept memory was edited splits the merge and keeps the edit", async () => {
    const { runId, older, newer } = await seedAndRun();
    const edited = await owner.patch(`/v1/memories/${newer}`, { content: "We use pnpm 9 in the web repo." });
    expect(edited.status, edited.text).toBe(200);
    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge" } });
    expect((await owner.post(`/v1/dreams/actions/${action.id}/undo`)).status).toBe(200);
    expect(await memory(older)).toMatchObject({ state: "active", content: DUP_OLD });
    expect((await memory(newer)).content).toBe("We use pnpm 9 in the web repo.");
  }, 180_000);

  it("a failing model falls back: the newer kept as it is, topics named from their distinctive terms", async () => {
    fake.mode = "error";
    const { runId, older, newer, k8s } = await seedAndRun();
    expect(schemasSent()).toContain("merged_memory");
    expect(await memory(older)).toMatchObject({ state: "archived", supersededBy: newer });
    expect(await memory(newer)).toMatchObject({ state: "active", content: DUP_NEW, version: 1 });
    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge" } });
    expect(action.details).toMatchObject({ rewritten: false, rewrite_skipped: `chat model failed (details in the server log, dream run ${runId})` });
    expect(JSON.stringify(action.details)).not.toContain("the fake model is down");
    expect(action.details).not.toHaveProperty("original_content");
    const topic = await h.db.topic.findUniqueOrThrow({ where: { id: (await memory(k8s)).topicId! } });
    expect(topic.name).not.toBe("Kubernetes operations");
    expect(topic.name).toMatch(/^[A-Z][a-z0-9]+ & [A-Z][a-z0-9]+$/);
  }, 180_000);

  it("a model that does not answer in time falls back the same way", async () => {
    fake.mode = "hang";
    process.env.ENGRAM_DREAM_MODEL_TIMEOUT_MS = "300";
    const { runId, newer } = await seedAndRun();
    expect(await memory(newer)).toMatchObject({ content: DUP_NEW, version: 1 });
    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge" } });
    expect(action.details).toMatchObject({ rewritten: false });
  }, 180_000);

  // Several connections only. A merge batch rewrites each kept memory (a content change: its trigger
  // takes the hub's counter) one statement after another. Had it locked each memory only when it
  // wrote it, it would hold the hub's counter from the first rewrite while waiting for the second
  // memory, and an edit of that memory (its row first, then the same counter) would deadlock with it.
  it.skipIf(!testPostgres())("a merge batch locks all its memories before its first write, so an edit holding one of them never waits for the dream", async () => {
    // Which kept memory the batch rewrites first is the dream's business: hold each in turn, once.
    for (const held of [1, 3]) {
      const { hubId, ids } = await seedTwoMerges();
      const runId: string = (await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
      // An edit of a kept memory, stopped after it locked the memory's row; its trigger would take the
      // hub's counter next, and must not have to wait for the dream.
      const { started, free } = await stalledLock(
        h.url!,
        { sql: "SELECT id FROM memories WHERE id = $1 FOR UPDATE", params: [ids[held]] },
        () => runDreamRunOnce(h.db, runId),
        { sql: "SELECT 1 FROM storage_usage WHERE scope = 'hub' AND scope_id = $1 FOR UPDATE NOWAIT", params: [hubId] },
      );
      expect(await started).toBe(true);
      expect(free, `holding memory ${held}`).toBe(true);
      expect(await memory(ids[0]!)).toMatchObject({ state: "archived", supersededBy: ids[1] });
      expect(await memory(ids[2]!)).toMatchObject({ state: "archived", supersededBy: ids[3] });
      expect((await memory(ids[3]!)).version).toBe(2);
      const counter = await h.db.storageUsage.findUniqueOrThrow({ where: { scope_scopeId: { scope: "hub", scopeId: hubId } } });
      expect(Number(counter.bytes)).toBe((await h.db.memory.findMany({ where: { hubId }, select: { content: true } })).reduce((sum, m) => sum + Buffer.byteLength(m.content), 0));
    }
  }, 180_000);
});

describe("a merge and its undo against the storage quotas", () => {
  const hubBytes = async (hubId: string) => Number((await h.db.storageUsage.findUniqueOrThrow({ where: { scope_scopeId: { scope: "hub", scopeId: hubId } } })).bytes);
  const ownerBytes = async () => Number((await h.db.storageUsage.findUniqueOrThrow({ where: { scope_scopeId: { scope: "user", scopeId: owner.id } } })).bytes);
  const runDream = async (hubId: string) => {
    const runId: string = (await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
    expect(await runDreamRunOnce(h.db, runId)).toBe(true);
    return runId;
  };

  // The merged text holds both memories' (up to both together), and the archived side still counts: a
  // rewrite grows what the hub and the owner store, as an edit does.
  it("a merge whose text would take the hub or its owner past a quota keeps the newer as it is (the older still archived)", async () => {
    for (const scope of ["hub", "user"] as const) {
      const { hubId, ids } = await seedTwoMerges();
      const limit = (scope === "hub" ? await hubBytes(hubId) : await ownerBytes()) + 10;
      process.env[scope === "hub" ? "ENGRAM_QUOTA_HUB_BYTES" : "ENGRAM_QUOTA_USER_BYTES"] = String(limit);
      const runId = await runDream(hubId);
      expect(await memory(ids[0]!)).toMatchObject({ state: "archived", supersededBy: ids[1] });
      expect(await memory(ids[1]!)).toMatchObject({ state: "active", content: DUP_NEW, version: 1 });
      expect(await memory(ids[3]!)).toMatchObject({ state: "active", content: PAIR[1], version: 1 });
      const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge", resultMemoryId: ids[1] } });
      expect(action.details).toMatchObject({ rewritten: false, rewrite_skipped: expect.stringMatching(/storage quota/) });
      expect(scope === "hub" ? await hubBytes(hubId) : await ownerBytes(), scope).toBeLessThanOrEqual(limit);
      delete process.env.ENGRAM_QUOTA_HUB_BYTES;
      delete process.env.ENGRAM_QUOTA_USER_BYTES;
    }
  }, 180_000);

  // The pipeline's extraction writes a memory's text without stamping updated_at, so its content_changed_at
  // stays as the scan read it: only the rewrite's hash tells the text changed while the model merged. The
  // quota, checked first against the text the model read, logged the merge as skipped for a quota instead.
  it("a kept memory whose text changed while the model merged it is logged as changed, not as past a quota", async () => {
    const { hubId, ids } = await seedTwoMerges();
    process.env.ENGRAM_QUOTA_HUB_BYTES = String((await hubBytes(hubId)) + 10);
    const extracted = DUP_NEW.replace("pnpm", "PNPM");
    mergeReply = async (body) => {
      await h.db.$executeRaw`UPDATE memories SET content = ${extracted}, content_hash = ${contentHash(extracted)} WHERE id = ${ids[1]}::uuid`;
      return fakeMerge(body);
    };
    const runId = await runDream(hubId);
    expect(await memory(ids[1]!)).toMatchObject({ state: "active", content: extracted, version: 1 });
    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge", resultMemoryId: ids[1] } });
    expect(action.details).toMatchObject({ rewritten: false, rewrite_skipped: "the kept memory changed while the model merged it" });
  }, 180_000);

  it("an undo putting back a longer original text is held to the quotas as an edit is (413, nothing undone)", async () => {
    // A model that merged into fewer words than the kept memory had: the undo grows it back.
    mergeReply = () => ({ content: "pnpm, not npm." });
    const { hubId, ids } = await seedTwoMerges();
    const runId = await runDream(hubId);
    expect(await memory(ids[1]!)).toMatchObject({ content: "pnpm, not npm." });
    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge", resultMemoryId: ids[1] } });
    const limit = (await hubBytes(hubId)) + 10;
    process.env.ENGRAM_QUOTA_HUB_BYTES = String(limit);
    const refused = await owner.post(`/v1/dreams/actions/${action.id}/undo`);
    expect(refused.status, refused.text).toBe(413);
    expect(refused.body.error).toMatchObject({ code: "quota_exceeded", details: { scope: "hub", resource: "bytes", limit } });
    expect(await memory(ids[0]!)).toMatchObject({ state: "archived", supersededBy: ids[1] });
    expect(await memory(ids[1]!)).toMatchObject({ content: "pnpm, not npm." });
    expect(await hubBytes(hubId)).toBeLessThanOrEqual(limit);
    expect((await h.db.dreamAction.findUniqueOrThrow({ where: { id: action.id } })).state).toBe("applied");
    // With room, it goes through.
    delete process.env.ENGRAM_QUOTA_HUB_BYTES;
    expect((await owner.post(`/v1/dreams/actions/${action.id}/undo`)).status).toBe(200);
    expect(await memory(ids[1]!)).toMatchObject({ content: DUP_NEW });
  }, 180_000);
});

describe("a merge batch and its owners' counters (PostgreSQL)", () => {
  // A rewrite of a kept memory takes its owner's counter. Rewritten one statement at a time, the batch
  // took two owners' counters in its actions' order, while a hub's deletion (or a batch move) takes
  // several users' counters sorted: the dream holding the higher waited for the lower, the deletion
  // holding the lower waited for the higher, a deadlock.
  it.skipIf(!testPostgres())("takes the owners' counters sorted, before its first rewrite: holding the lower, it holds not the higher", async () => {
    const [x, y] = [await h.user("Xia"), await h.user("Yan")];
    const [low, high] = [x, y].sort((a, b) => (a.id < b.id ? -1 : 1)) as [Client, Client];
    // Which pair the batch rewrites first is the dream's business: each owner keeps the first pair once.
    for (const [first, second] of [[x, y], [y, x]] as const) {
      const hubId = await h.teamHub(owner, [[x, "contributor"], [y, "contributor"]]);
      const ids: string[] = [];
      const base = Date.now() - 10 * DAY;
      for (const [i, content] of [DUP_OLD, DUP_NEW, ...PAIR].entries()) {
        const by = i < 2 ? first : second;
        const res = await by.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
        expect(res.status, res.text).toBe(201);
        ids.push(res.body.data.id);
        const at = new Date(base + i * 60_000);
        await backdateMemories(h.db, ids[i]!, { createdAt: at, updatedAt: at });
      }
      await indexMemories(h.db, ids);
      const runId: string = (await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
      const { started, free } = await stalledLock(
        h.url!,
        { sql: "SELECT 1 FROM storage_usage WHERE scope = 'user' AND scope_id = $1 FOR UPDATE", params: [low.id] },
        () => runDreamRunOnce(h.db, runId),
        { sql: "SELECT 1 FROM storage_usage WHERE scope = 'user' AND scope_id = $1 FOR UPDATE NOWAIT", params: [high.id] },
      );
      expect(await started).toBe(true);
      expect(free, `first pair kept by ${first === low ? "the lower" : "the higher"} id`).toBe(true);
      expect((await memory(ids[1]!)).version).toBe(2);
      expect((await memory(ids[3]!)).version).toBe(2);
      for (const user of [x, y]) {
        const rows = await h.db.memory.findMany({ where: { ownerId: user.id, hub: { members: { some: { userId: user.id } } } }, select: { content: true } });
        const counter = await h.db.storageUsage.findUniqueOrThrow({ where: { scope_scopeId: { scope: "user", scopeId: user.id } } });
        expect(Number(counter.bytes)).toBe(rows.reduce((sum, m) => sum + Buffer.byteLength(m.content), 0));
      }
    }
  }, 240_000);
});

describe("new topics and the hub's limit of 500", () => {
  it("topics created while the run names its new one take the room first: the run creates none past 500 and leaves its cluster unsorted", async () => {
    const hubId = await h.teamHub(owner);
    const ids: string[] = [];
    for (const content of K8S) ids.push((await owner.post("/v1/memories", { content, stability: "stable" }, { headers: { "x-hub-id": hubId } })).body.data.id);
    await indexMemories(h.db, ids);
    // Room for two when the run plans; members take both while the model names the run's topic.
    const shelves = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ id: newId(), hubId, name: `Shelf ${from + i}` }));
    await h.db.topic.createMany({ data: shelves(0, 498) });
    const answer = fake.answer;
    fake.answer = async (schema, body) => {
      if (schema === "topic_name") await h.db.topic.createMany({ data: shelves(498, 2) });
      return answer(schema, body);
    };
    try {
      const res = await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(202);
      expect(await runDreamRunOnce(h.db, res.body.data.run_id)).toBe(true);
      expect(schemasSent()).toContain("topic_name");
      const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: res.body.data.run_id } });
      expect(run.status).toBe("completed");
      // Its metrics say so: the topic and the filings it planned and made none of were counted as made.
      expect((run.phaseMetrics as Record<string, Record<string, number>>).organize).toMatchObject({ actions: 0, topics_created: 0 });
    } finally {
      fake.answer = answer;
    }
    expect(await h.db.topic.count({ where: { hubId } })).toBe(500);
    expect((await h.db.memory.findMany({ where: { id: { in: ids } } })).map((m) => m.topicId)).toEqual([null, null, null, null]);
  }, 180_000);
});

describe("the schedule after a run that rewrote a merge", () => {
  it("the run's own rewrite does not make the hub due again; a member's edit does", async () => {
    const { hubId, runId, newer } = await seedAndRun();
    expect((await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge" } })).details).toMatchObject({ rewritten: true });
    const later = () => new Date(Date.now() + 2 * DAY);
    expect(await dueHubs(h.db, later(), 24, 10_000)).not.toContain(hubId);
    expect((await owner.patch(`/v1/memories/${newer}`, { content: "We use pnpm 9 in the web repo." })).status).toBe(200);
    expect(await dueHubs(h.db, later(), 24, 10_000)).toContain(hubId);
  }, 180_000);
});

describe("a new topic named like one at the top of the tree", () => {
  it("takes a free name beside an archived one, and files into one a member made meanwhile in another case", async () => {
    const hubId = await h.teamHub(owner);
    const ids: string[] = [];
    for (const content of K8S) ids.push((await owner.post("/v1/memories", { content, stability: "stable" }, { headers: { "x-hub-id": hubId } })).body.data.id);
    await indexMemories(h.db, ids);
    // The model names the cluster "Kubernetes operations": archived at the top of the tree, it takes no memories.
    const archived = await h.db.topic.create({ data: { id: newId(), hubId, name: "Kubernetes operations", archivedAt: new Date() } });
    // While the model names it, a member makes the next free name, in their own case.
    const mine = newId();
    const answer = fake.answer;
    fake.answer = async (schema, body) => {
      if (schema === "topic_name") await h.db.topic.create({ data: { id: mine, hubId, name: "kubernetes OPERATIONS 2" } });
      return answer(schema, body);
    };
    try {
      const res = await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(202);
      expect(await runDreamRunOnce(h.db, res.body.data.run_id)).toBe(true);
      expect(schemasSent()).toContain("topic_name");
      const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: res.body.data.run_id } });
      expect([run.status, run.error]).toEqual(["completed", null]);
    } finally {
      fake.answer = answer;
    }
    const topics = (await h.db.memory.findMany({ where: { id: { in: ids } } })).map((m) => m.topicId);
    expect(topics).toEqual([mine, mine, mine, mine]);
    expect((await h.db.topic.findUniqueOrThrow({ where: { id: archived.id } })).name).toBe("Kubernetes operations");
    expect(await h.db.topic.count({ where: { hubId } })).toBe(2);
  }, 180_000);

  /**
   * A topic being deleted is hidden from everyone and takes no memories: the run read it with the
   * others, so its name was taken (the new topic became "… 2") and, made while the model named the
   * cluster, it took the cluster, whose filing it then refused (the memories stayed unsorted).
   */
  it("leaves out a topic being deleted: its name is free, and it takes no cluster", async () => {
    const hubId = await h.teamHub(owner);
    const ids: string[] = [];
    for (const content of K8S) ids.push((await owner.post("/v1/memories", { content, stability: "stable" }, { headers: { "x-hub-id": hubId } })).body.data.id);
    await indexMemories(h.db, ids);
    const deleting = await h.db.topic.create({ data: { id: newId(), hubId, name: "Kubernetes operations", deletingAt: new Date() } });
    // And one more, in another case, while the model names the cluster.
    const answer = fake.answer;
    fake.answer = async (schema, body) => {
      if (schema === "topic_name") await h.db.topic.create({ data: { id: newId(), hubId, name: "KUBERNETES operations", deletingAt: new Date() } });
      return answer(schema, body);
    };
    try {
      const res = await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(202);
      expect(await runDreamRunOnce(h.db, res.body.data.run_id)).toBe(true);
      const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: res.body.data.run_id } });
      expect([run.status, run.error]).toEqual(["completed", null]);
    } finally {
      fake.answer = answer;
    }
    const made = await h.db.topic.findMany({ where: { hubId, deletingAt: null } });
    expect(made.map((t) => t.name)).toEqual(["Kubernetes operations"]);
    const topics = (await h.db.memory.findMany({ where: { id: { in: ids } } })).map((m) => m.topicId);
    expect(topics).toEqual(ids.map(() => made[0]!.id));
    expect(made[0]!.id).not.toBe(deleting.id);
  }, 180_000);
});

describe("what a merge rewrite reads", () => {
  /**
   * The rewrite step read both whole contents of every merge pair of the run (megabytes each, pairs
   * by the thousand) though it calls the model for the first ENGRAM_DREAM_MAX_MODEL_CALLS pairs only,
   * each side at most MERGE_MAX_INPUT_CHARS long. It now reads those pairs, and one character past that.
   */
  it("reads only the pairs the model is called for, and of each side no more than fits the prompt", async () => {
    const { hubId, ids } = await seedTwoMerges();
    // Past the part the duplicate checks read, and after the embeddings: both pairs are found as before.
    const markers = { [ids[1]!]: "qxmarkone", [ids[3]!]: "qxmarktwo" };
    for (const [id, marker] of Object.entries(markers)) {
      const row = await memory(id);
      await h.db.memory.update({ where: { id }, data: { content: `${row.content}${" ".repeat(5000)}${` ${marker}`.repeat(40_000)}` } });
    }
    process.env.ENGRAM_DREAM_MAX_MODEL_CALLS = "1";
    try {
      const runId: string = (await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
      const seen: unknown[] = [];
      expect(await runDreamRunOnce(readSpy(h.db, seen), runId)).toBe(true);
      const merges = await h.db.dreamAction.findMany({ where: { runId, actionType: "merge" } });
      expect(merges.map((m) => (m.details as { kept_id: string }).kept_id).sort()).toEqual([ids[1], ids[3]].sort());
      const tried = merges.filter((m) => (m.details as { rewrite_skipped?: string }).rewrite_skipped);
      expect(tried).toHaveLength(1);
      expect(tried[0]!.details).toMatchObject({ rewritten: false, rewrite_skipped: expect.stringMatching(/too long to rewrite/) });
      const triedId = (tried[0]!.details as { kept_id: string }).kept_id;
      const untriedId = triedId === ids[1] ? ids[3]! : ids[1]!;
      expect(longestWith(seen, markers[untriedId]!)).toBe(0);
      expect(longestWith(seen, markers[triedId]!)).toBeGreaterThan(0);
      expect(longestWith(seen, markers[triedId]!)).toBeLessThanOrEqual(8_001);
    } finally {
      delete process.env.ENGRAM_DREAM_MAX_MODEL_CALLS;
    }
  }, 180_000);
});

describe("a run whose model merges take longer than a heartbeat's staleness", () => {
  /**
   * The run wrote its heartbeat only as it committed a batch, and the merge rewrites (up to half the
   * run's budget, 150 s, before the first batch) outlast the 120 s after which another worker's sweep
   * takes a run for crashed: the run was taken over mid-merge, its model calls thrown away, and the
   * next worker's rewrites outlasted it the same way. The run now beats while it works.
   */
  it("keeps its lease: another worker's sweep while the model thinks finds it alive, and the run completes", async () => {
    const { hubId, ids } = await seedTwoMerges();
    const runId: string = (await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
    const config = dreamConfig({ staleRunMs: 1_500 });
    const taken: boolean[] = [];
    const answer = fake.answer;
    fake.answer = async (schema, body) => {
      if (schema === "merged_memory" && taken.length === 0) {
        taken.push(false);
        // The model thinks for longer than a heartbeat stays fresh; then another worker's sweep looks.
        await new Promise((resolve) => setTimeout(resolve, 2_500));
        taken[0] = await claimDreamRun(h.db, runId, "another-worker", new Date(), config.staleRunMs);
      }
      return answer(schema, body);
    };
    try {
      expect(await runDreamRunOnce(h.db, runId, { owner: "first-worker", config })).toBe(true);
    } finally {
      fake.answer = answer;
    }
    expect(taken).toEqual([false]);
    expect(await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "completed", leaseOwner: "first-worker", attempts: 1 });
    expect(await memory(ids[0]!)).toMatchObject({ state: "archived", supersededBy: ids[1] });
    expect(await memory(ids[2]!)).toMatchObject({ state: "archived", supersededBy: ids[3] });
  }, 180_000);
});

describe("the bound on a run's model calls, across a resume", () => {
  /**
   * At most ENGRAM_DREAM_MAX_MODEL_CALLS merge rewrites a run, but counted per attempt: a run resumed after
   * a merge batch (a crashed worker, an Inngest step's retry) asked the model up to the whole bound again.
   */
  it("asks the model no more often than the run's bound in all", async () => {
    const { hubId } = await seedTwoMerges();
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig({ maxModelCallsPerRun: 1, batchSize: 1 });
    expect(await claimDreamRun(h.db, run.run_id, "doomed", new Date(), config.staleRunMs)).toBe(true);
    const merges = () => fake.requests.filter((body) => body?.response_format?.json_schema?.name === "merged_memory").length;
    const before = merges();
    const crash = new Error("simulated crash");
    const afterBatch = (phase: string) => {
      if (phase === "similar") throw crash;
    };
    await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, run.run_id, "doomed")).rejects.toBe(crash);
    expect(merges() - before).toBe(1);
    expect(await claimDreamRun(h.db, run.run_id, "rescuer", new Date(Date.now() + 3_600_000), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, run.run_id, "rescuer")).toBe("completed");
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "merge" } })).toBe(2);
    expect(merges() - before).toBe(1);
  }, 120_000);

  /**
   * The run's calls were counted from its saved merge actions, but the similar step asks the model for
   * every merge before its first batch saves one: a crash (or a stop, or a step's retry) between the
   * answers and that save lost them uncounted, and each attempt asked up to the whole bound again.
   */
  it("counts the calls made before a crash that came ahead of the first batch's save", async () => {
    const { hubId } = await seedTwoMerges();
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig({ maxModelCallsPerRun: 1, batchSize: 1 });
    expect(await claimDreamRun(h.db, run.run_id, "doomed", new Date(), config.staleRunMs)).toBe(true);
    const merges = () => fake.requests.filter((body) => body?.response_format?.json_schema?.name === "merged_memory").length;
    const before = merges();
    const crash = new Error("simulated crash");
    // The worker dies once the model has answered, before the first batch's transaction.
    const now = () => {
      if (merges() > before) throw crash;
      return new Date();
    };
    await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, now }, run.run_id, "doomed")).rejects.toBe(crash);
    expect(merges() - before).toBe(1);
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id } })).toBe(0);
    expect(await claimDreamRun(h.db, run.run_id, "rescuer", new Date(Date.now() + 3_600_000), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, run.run_id, "rescuer")).toBe("completed");
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "merge" } })).toBe(2);
    expect(merges() - before).toBe(1);
  }, 120_000);
});

describe("the bound on a run's model calls, for topic names", () => {
  /**
   * The topic names were asked outside ENGRAM_DREAM_MAX_MODEL_CALLS: merges count theirs on the run, the
   * names nowhere, so every attempt of the organize step (a crash, an Inngest step's retry) asked for all
   * of them again (up to 20 an attempt). They now take their calls from the same count before asking, and
   * a topic without room is named by its distinctive words.
   */
  it("counts them on the run, and a resume past the bound names the topic locally", async () => {
    const hubId = await h.teamHub(owner);
    const ids: string[] = [];
    for (const content of K8S) ids.push((await owner.post("/v1/memories", { content, stability: "stable" }, { headers: { "x-hub-id": hubId } })).body.data.id);
    await indexMemories(h.db, ids);
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig({ maxModelCallsPerRun: 1 });
    expect(await claimDreamRun(h.db, run.run_id, "doomed", new Date(), config.staleRunMs)).toBe(true);
    const names = () => fake.requests.filter((body) => body?.response_format?.json_schema?.name === "topic_name").length;
    const before = names();
    const crash = new Error("simulated crash");
    // The worker dies once the model has named the topic, before the organize step's first batch.
    const now = () => {
      if (names() > before) throw crash;
      return new Date();
    };
    await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, now }, run.run_id, "doomed")).rejects.toBe(crash);
    expect(names() - before).toBe(1);
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: run.run_id } })).modelCalls).toBe(1);
    expect(await claimDreamRun(h.db, run.run_id, "rescuer", new Date(Date.now() + 3_600_000), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, run.run_id, "rescuer")).toBe("completed");
    expect(names() - before).toBe(1);
    const topics = await h.db.topic.findMany({ where: { hubId } });
    expect(topics).toHaveLength(1);
    expect(topics[0]!.name).not.toBe("Kubernetes operations");
    expect((await h.db.memory.findMany({ where: { id: { in: ids } } })).map((m) => m.topicId)).toEqual(ids.map(() => topics[0]!.id));
  }, 120_000);
});
