import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { charactersRead } from "./support/characters-read.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";
import { indexMemories } from "./recall-helpers.ts";

// GET /v1/memories/search (Memax's `memories.search`): words only, one row per memory, scoped to
// readable hubs, a half-typed word still finds a title.

let h: Harness;
let ann: Client;
let mira: Client;
let eve: Client;
let teamHub: string;
let topicId: string;
const ids: Record<string, string> = {};

async function push(who: Client, name: string, body: Record<string, unknown>, hubId?: string) {
  const res = await who.post("/v1/memories", body, hubId ? { headers: { "x-hub-id": hubId } } : {});
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  ids[name] = res.body.data.id;
}

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  mira = await h.user("Mira");
  eve = await h.user("Eve");
  teamHub = await h.teamHub(ann, [[mira, "contributor"]]);
  const topic = await ann.post("/v1/topics", { name: "Operations" }, { headers: { "x-hub-id": teamHub } });
  topicId = topic.body.data.id;
  await push(mira, "deploy", { content: `# Deploy checklist\n\n## Rollout\n\n${"Warm the caches before traffic moves. ".repeat(6)}Roll the api pods after the database migrations finish, then watch the error rate.` }, teamHub);
  await push(ann, "pods", { content: "# Pod sizing\n\nThe api pods need 2 GiB each; the worker pods 4 GiB." });
  await push(ann, "lunch", { content: "# Lunch rota\n\nTuesday is tacos." });
  await push(eve, "secret", { content: "# Eve's api pods\n\nEve's private notes on pods and migrations." });
  await indexMemories(h.db, Object.values(ids), { embed: false });
  expect((await ann.post("/v1/memories/batch-move", { ids: [ids.deploy], topic_id: topicId }, { headers: { "x-hub-id": teamHub } })).status).toBe(200);
});
afterAll(async () => {
  await h?.close();
});

describe("GET /v1/memories/search", () => {
  it("ranks memories by their words across the caller's hubs, one row each, with a snippet around the match", async () => {
    const res = await ann.get("/v1/memories/search?q=api%20pods%20migrations");
    expect(res.status).toBe(200);
    const rows = res.body.data as { memory_id: string; snippet: string; hub_name: string; kind: string; stability: string }[];
    expect(rows.map((r) => r.memory_id)).toEqual([ids.deploy, ids.pods]);
    const deploy = rows[0]!;
    expect(deploy).toMatchObject({ title: "Deploy checklist", hub_id: teamHub, topic_id: topicId, topic_name: "Operations", heading_chain: expect.stringContaining("Rollout") });
    expect(typeof deploy.kind).toBe("string");
    expect(typeof deploy.stability).toBe("string");
    expect(deploy.hub_name).toMatch(/^Team/);
    // The chunk is long: the snippet starts near the first match, not at the top.
    expect(deploy.snippet.startsWith("…")).toBe(true);
    expect(deploy.snippet).toContain("api pods");
    expect(deploy.snippet.length).toBeLessThanOrEqual(170);
    expect(rows[1]).not.toHaveProperty("topic_id");
  });

  it("never shows another user's memories, and narrows to one hub by X-Hub-ID or hub_id", async () => {
    const everyone = await ann.get("/v1/memories/search?q=pods");
    expect(JSON.stringify(everyone.body.data)).not.toContain(ids.secret);
    const header = await ann.get("/v1/memories/search?q=pods", { headers: { "x-hub-id": teamHub } });
    expect(header.body.data.map((r: { memory_id: string }) => r.memory_id)).toEqual([ids.deploy]);
    const param = await ann.get(`/v1/memories/search?q=pods&hub_id=${teamHub}`);
    expect(param.body.data.map((r: { memory_id: string }) => r.memory_id)).toEqual([ids.deploy]);
    // A hub the caller cannot read is a 404, whoever owns it.
    expect((await eve.get(`/v1/memories/search?q=pods&hub_id=${teamHub}`)).status).toBe(404);
  });

  it("finds a title by a half-typed word, after the word matches", async () => {
    const res = await ann.get("/v1/memories/search?q=Lun");
    expect(res.body.data.map((r: { title: string }) => r.title)).toEqual(["Lunch rota"]);
    // Short texts come whole, without markdown heading marks.
    expect(res.body.data[0].snippet).toBe("Lunch rota Tuesday is tacos.");
    // LIKE wildcards in the text are literal.
    expect((await ann.get("/v1/memories/search?q=%25")).body.data).toEqual([]);
    expect((await ann.get("/v1/memories/search?q=L_nch")).body.data).toEqual([]);
  });

  it("filters by topic, honours limit, and skips archived memories", async () => {
    const inTopic = await ann.get(`/v1/memories/search?q=pods&topic_id=${topicId}`);
    expect(inTopic.body.data.map((r: { memory_id: string }) => r.memory_id)).toEqual([ids.deploy]);
    const one = await ann.get("/v1/memories/search?q=pods&limit=1");
    expect(one.body.data).toHaveLength(1);
    expect((await ann.patch(`/v1/memories/${ids.pods}`, { state: "archived" })).status).toBe(200);
    const after = await ann.get("/v1/memories/search?q=pods");
    expect(after.body.data.map((r: { memory_id: string }) => r.memory_id)).toEqual([ids.deploy]);
    expect((await ann.patch(`/v1/memories/${ids.pods}`, { state: "active" })).status).toBe(200);
  });

  it("answers bad input with clear 400s", async () => {
    expect((await ann.get("/v1/memories/search")).body.error.code).toBe("invalid_request");
    expect((await ann.get("/v1/memories/search?q=%20%20")).body.error.code).toBe("invalid_request");
    expect((await ann.get(`/v1/memories/search?q=${"x".repeat(501)}`)).body.error.code).toBe("invalid_request");
    expect((await ann.get("/v1/memories/search?q=pods&limit=0")).body.error.code).toBe("invalid_limit");
    expect((await ann.get("/v1/memories/search?q=pods&topic_id=nope")).body.error.code).toBe("invalid_request");
    expect((await ann.get("/v1/memories/search?q=pods&hub_id=my-slug")).body.error.code).toBe("invalid_request");
    expect((await ann.get("/v1/memories/search?q=pods&limit=500")).status).toBe(200);
  });

  it.skipIf(testPostgres())("reads only the opening of a long memory's text for its snippet, not the whole text", async () => {
    const zoe = await h.user("Zoe");
    const body = `Zebrafish tank log.\n\n${"The filters were rinsed and the water tested again. ".repeat(20_000)}`;
    for (let i = 0; i < 4; i++) expect((await zoe.post("/v1/memories", { title: `Zebrafish ${i}`, content: `${i} ${body}` })).status).toBe(201);
    for (const q of ["zebraf", "tank"]) {
      let res: Awaited<ReturnType<Client["get"]>> | undefined;
      const read = await charactersRead(h.database, async () => {
        res = await zoe.get(`/v1/memories/search?q=${q}`);
      });
      expect(res!.status).toBe(200);
      expect(res!.body.data).toHaveLength(4);
      expect(res!.body.data[0].snippet).toMatch(/Zebrafish tank log\. The filters/);
      // Four memories of 1 MB each: the old statement read all 4 MB.
      expect(read, q).toBeLessThan(500_000);
    }
  });

  it("returns nothing, not an error, for words no memory has", async () => {
    const res = await ann.get("/v1/memories/search?q=zeppelin");
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([]);
  });

  it("the list and the search take their hub the same way: hub_id, else X-Hub-ID, a slug 400 naming which, another's hub 404", async () => {
    for (const path of ["/v1/memories?", "/v1/memories/search?q=pods&"]) {
      const bySlug = await ann.get(`${path}hub_id=my-slug`);
      expect(bySlug.status).toBe(400);
      expect(bySlug.body.error).toMatchObject({ code: "invalid_request", message: "hub_id must be a hub id (not a slug)" });
      const byHeader = await ann.get(path, { headers: { "x-hub-id": "my-slug" } });
      expect(byHeader.status).toBe(400);
      expect(byHeader.body.error.message).toBe("X-Hub-ID must be a hub id (not a slug)");
      expect((await eve.get(`${path}hub_id=${teamHub}`)).status).toBe(404);
      expect((await eve.get(path, { headers: { "x-hub-id": teamHub } })).status).toBe(404);
      // hub_id wins over the header.
      const scoped = await mira.get(`${path}hub_id=${teamHub}`, { headers: { "x-hub-id": "my-slug" } });
      expect(scoped.status).toBe(200);
    }
    const listed = await mira.get("/v1/memories", { headers: { "x-hub-id": teamHub } });
    expect(listed.body.data.memories.map((m: { id: string }) => m.id)).toEqual([ids.deploy]);
  });
});
