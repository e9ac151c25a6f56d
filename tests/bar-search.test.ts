import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { indexMemories } from "./recall-helpers.ts";

// GET /v1/bar/search (Memax's `bar.search`): memories by their words, topics and hubs by name, in one
// response, each scoped to what the caller can read.

let h: Harness;
let ann: Client & { personalHubId: string };
let eve: Client;
let teamHub: string;
let eveHub: string;
const topics: Record<string, string> = {};
let deployMemory: string;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  eve = await h.user("Eve");
  teamHub = await h.teamHub(ann);
  eveHub = await h.teamHub(eve);
  expect((await ann.patch(`/v1/hubs/${teamHub}`, { name: "Deploy crew" })).status).toBe(200);
  expect((await eve.patch(`/v1/hubs/${eveHub}`, { name: "Deploy secrets" })).status).toBe(200);
  const inTeam = { headers: { "x-hub-id": teamHub } };
  for (const [key, body] of [
    ["deploys", { name: "Deploys" }],
    ["rollouts", { name: "Rollouts", description: "How we deploy safely" }],
    ["redeploy", { name: "Redeploy drills" }],
    ["lunch", { name: "Lunch" }],
    ["percent", { name: "100% uptime" }],
  ] as const) {
    const res = await ann.post("/v1/topics", body, inTeam);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    topics[key] = res.body.data.id;
  }
  const archived = await ann.post("/v1/topics", { name: "Deploy archive" }, inTeam);
  expect((await ann.post(`/v1/topics/${archived.body.data.id}/archive`, {}, inTeam)).status).toBe(200);
  expect((await eve.post("/v1/topics", { name: "Deploy keys" }, { headers: { "x-hub-id": eveHub } })).status).toBe(201);
  const memory = await ann.post("/v1/memories", { content: "# Deploy checklist\n\nRoll the api pods after the migrations finish." }, inTeam);
  deployMemory = memory.body.data.id;
  await eve.post("/v1/memories", { content: "# Deploy keys\n\nEve's deploy keys live in the vault." }, { headers: { "x-hub-id": eveHub } });
  await indexMemories(h.db, [deployMemory], { embed: false });
});
afterAll(async () => {
  await h?.close();
});

describe("GET /v1/bar/search", () => {
  it("answers memories, topics and hubs matching the text, best name matches first, nothing of other users", async () => {
    const res = await ann.get("/v1/bar/search?q=deploy");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const body = res.body.data;
    expect(body.query).toBe("deploy");
    expect(body.memories.map((m: { memory_id: string }) => m.memory_id)).toEqual([deployMemory]);
    expect(body.memories[0]).toMatchObject({ title: "Deploy checklist", hub_id: teamHub });
    // Prefix before substring before description-only; the archived topic and Eve's are absent.
    expect(body.topics.map((t: { id: string }) => t.id)).toEqual([topics.deploys, topics.redeploy, topics.rollouts]);
    expect(body.topics[2]).toEqual({ id: topics.rollouts, name: "Rollouts", description: "How we deploy safely", hub_id: teamHub });
    expect(body.topics[0]).not.toHaveProperty("description");
    expect(body.hubs).toEqual([{ id: teamHub, name: "Deploy crew" }]);
  });

  it("answers an empty or blank q with empty lists, and bounds each list by limit", async () => {
    for (const q of ["", "%20%20"]) {
      const res = await ann.get(`/v1/bar/search?q=${q}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual({ query: "", memories: [], topics: [], hubs: [] });
    }
    expect((await ann.get("/v1/bar/search")).body.data.topics).toEqual([]);
    const one = await ann.get("/v1/bar/search?q=deploy&limit=1");
    expect(one.body.data.topics.map((t: { id: string }) => t.id)).toEqual([topics.deploys]);
    expect(one.body.data.hubs).toHaveLength(1);
    expect((await ann.get("/v1/bar/search?q=deploy&limit=0")).status).toBe(400);
    expect((await ann.get(`/v1/bar/search?q=${"a".repeat(501)}`)).status).toBe(400);
  });

  it("treats % and _ as themselves", async () => {
    const res = await ann.get("/v1/bar/search?q=100%25");
    expect(res.body.data.topics.map((t: { id: string }) => t.id)).toEqual([topics.percent]);
    expect((await ann.get("/v1/bar/search?q=%25")).body.data.topics.map((t: { id: string }) => t.id)).toEqual([topics.percent]);
    expect((await ann.get("/v1/bar/search?q=_")).body.data.topics).toEqual([]);
  });

  it("narrows memories and topics to the hub in X-Hub-ID, keeps every readable hub as a jump target, and hides foreign hubs", async () => {
    const res = await ann.get("/v1/bar/search?q=deploy", { headers: { "x-hub-id": ann.personalHubId } });
    expect(res.status).toBe(200);
    expect(res.body.data.memories).toEqual([]);
    expect(res.body.data.topics).toEqual([]);
    expect(res.body.data.hubs).toEqual([{ id: teamHub, name: "Deploy crew" }]);
    expect((await ann.get(`/v1/bar/search?q=deploy&hub_id=${eveHub}`)).status).toBe(404);
    expect((await ann.get("/v1/bar/search?q=deploy&hub_id=deploy-crew")).status).toBe(400);
  });
});
