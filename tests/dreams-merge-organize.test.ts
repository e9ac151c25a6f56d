import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { indexMemories } from "./recall-helpers.ts";
import { backdateMemories } from "./support/backdate-memories.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { startFakeOpenAiChat, type FakeOpenAiChat } from "./support/openai-chat-fake.ts";

// A merge that rewrites the kept memory leaves it with an edit pending: the run's organize pass must
// not file it by the vectors of the text it held before (a resumed run, reading memories again, did
// not), the next run after it is processed does.

const FRONT = [
  "React components live in src/components and use CSS modules for styling.",
  "Every React component needs a Storybook story and a unit test with React Testing Library.",
  "The frontend uses React 19 with the new compiler enabled for all pages.",
];
const DUP_OLD = "New React components should be function components with hooks, styled with CSS modules.";
const DUP_NEW = "New React components should be written as function components with hooks and styled with CSS modules.";
const DAY = 86_400_000;

let h: Harness;
let owner: Client;
let fake: FakeOpenAiChat;
const saved = { ...process.env };

beforeAll(async () => {
  fake = await startFakeOpenAiChat((schema) =>
    schema === "merged_memory"
      ? { content: `${DUP_NEW} Also noted earlier: ${DUP_OLD}` }
      : schema === "topic_name"
        ? { name: "Frontend things" }
        : schema === "memory_classification"
          ? { kind: "semantic", stability: "evolving" }
          : { summary: "A note." },
  );
  Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: fake.url });
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  for (const key of ["ENGRAM_CHAT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"]) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
  await h?.close();
  await fake?.close();
});

describe("a merge's rewritten memory and the same run's organize pass", () => {
  it("is not filed by its old vectors", async () => {
    const hubId = await h.teamHub(owner);
    const ids: string[] = [];
    for (const [i, content] of [...FRONT, DUP_OLD, DUP_NEW].entries()) {
      const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
      const at = new Date(Date.now() - 10 * DAY + i * 60_000);
      await h.db.memory.update({ where: { id: res.body.data.id }, data: { createdAt: at, updatedAt: at } });
    }
    const topic = await owner.post("/v1/topics", { name: "Frontend", hub_id: hubId });
    expect(topic.status, topic.text).toBe(201);
    await h.db.memory.updateMany({ where: { id: { in: ids.slice(0, 3) } }, data: { topicId: topic.body.data.id } });
    await indexMemories(h.db, ids);
    const [older, newer] = [ids[3]!, ids[4]!];
    const run = await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
    expect(run.status, run.text).toBe(202);
    expect(await runDreamRunOnce(h.db, run.body.data.run_id)).toBe(true);
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: older } })).toMatchObject({ state: "archived", supersededBy: newer });
    const kept = await h.db.memory.findUniqueOrThrow({ where: { id: newer } });
    expect(kept).toMatchObject({ state: "active", version: 2, processingStatus: "pending" });
    expect(kept.topicId).toBeNull();
    // Processed (its new text chunked and embedded), the next run files it.
    await indexMemories(h.db, [newer]);
    const next = await queueDreamRun(h.db, hubId, owner.id, new Date());
    expect(next.status).toBe("queued");
    expect(await runDreamRunOnce(h.db, next.run_id)).toBe(true);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: newer } })).topicId).toBe(topic.body.data.id);
  }, 180_000);
});

describe("which of a duplicate pair a run keeps", () => {
  it("keeps the one whose content changed last, not the one filed into a topic last", async () => {
    const hubId = await h.teamHub(owner);
    const topic = await owner.post("/v1/topics", { name: "Frontend", hub_id: hubId });
    expect(topic.status, topic.text).toBe(201);
    const ids: string[] = [];
    for (const [i, content] of [DUP_OLD, DUP_NEW].entries()) {
      const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
      const at = new Date(Date.now() - (10 - i * 5) * DAY);
      await backdateMemories(h.db, res.body.data.id, { createdAt: at, updatedAt: at, contentChangedAt: at });
    }
    const [older, newer] = [ids[0]!, ids[1]!];
    // Filing the older one moves its updated_at past the newer one's; its text stays 10 days old.
    const filed = await owner.post(`/v1/topics/${topic.body.data.id}/memories`, { memory_id: older });
    expect(filed.status, filed.text).toBeLessThan(300);
    await indexMemories(h.db, ids);
    const run = await owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
    expect(run.status, run.text).toBe(202);
    expect(await runDreamRunOnce(h.db, run.body.data.run_id)).toBe(true);
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: older } })).toMatchObject({ state: "archived", supersededBy: newer });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: newer } })).toMatchObject({ state: "active", supersededBy: null });
  }, 180_000);
});
