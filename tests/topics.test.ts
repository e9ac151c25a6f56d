import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_TOPICS_PER_HUB } from "@/lib/topics/topic-fields.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

async function topic(client: Client, name: string, hubId?: string) {
  const res = await client.post("/v1/topics", { name, ...(hubId && { hub_id: hubId }) });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { id: string; hub_id: string; name: string; memory_count: number };
}

async function memory(client: Client, content: string, hubId?: string): Promise<string> {
  const res = await client.post("/v1/memories", { content }, hubId ? { headers: { "x-hub-id": hubId } } : {});
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

describe("create", () => {
  it("creates in the personal hub by default, trimming the name", async () => {
    const ann = await h.user("Ann");
    const res = await ann.post("/v1/topics", { name: "  Deploys  " });
    expect(res.status).toBe(201);
    const t = res.body.data;
    expect(t).toEqual({
      id: expect.any(String),
      hub_id: ann.personalHubId,
      name: "Deploys",
      memory_count: 0,
      created_by: ann.id,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: t.created_at,
    });
    expect(await h.db.topic.findUnique({ where: { id: t.id } })).toMatchObject({ hubId: ann.personalHubId, name: "Deploys" });
  });

  it("creates in a team hub via hub_id and via X-Hub-ID; hub_id wins over the header", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const other = await h.teamHub(ann);
    expect((await topic(ann, "Via body", team)).hub_id).toBe(team);
    const viaHeader = await ann.post("/v1/topics", { name: "Via header" }, { headers: { "x-hub-id": team } });
    expect(viaHeader.status).toBe(201);
    expect(viaHeader.body.data.hub_id).toBe(team);
    const both = await ann.post("/v1/topics", { name: "Both", hub_id: other }, { headers: { "x-hub-id": team } });
    expect(both.status).toBe(201);
    expect(both.body.data.hub_id).toBe(other);
  });

  it("checks the permission in the target hub, not the header's or personal hub", async () => {
    const ann = await h.user("Ann");
    const carl = await h.user("Carl");
    const vera = await h.user("Vera");
    const outsider = await h.user("Otto");
    const team = await h.teamHub(ann, [
      [carl, "contributor"],
      [vera, "viewer"],
    ]);

    const contributor = await carl.post("/v1/topics", { name: "Mine", hub_id: team });
    expect(contributor.status).toBe(403);
    expect(contributor.body.error.code).toBe("forbidden");
    // Carl owns his personal hub, but the header names the team hub.
    expect((await carl.post("/v1/topics", { name: "Mine" }, { headers: { "x-hub-id": team } })).status).toBe(403);
    // ...and a body hub_id is checked even when the header names a hub where he may manage topics.
    expect((await carl.post("/v1/topics", { name: "Mine", hub_id: team }, { headers: { "x-hub-id": carl.personalHubId } })).status).toBe(403);

    const viewer = await vera.post("/v1/topics", { name: "Mine", hub_id: team });
    expect(viewer.status).toBe(403);

    const stranger = await outsider.post("/v1/topics", { name: "Mine", hub_id: team });
    expect(stranger.status).toBe(404);
    expect(stranger.body.error.code).toBe("not_found");
    expect(stranger.text).not.toContain(team);
    expect((await outsider.post("/v1/topics", { name: "Mine" }, { headers: { "x-hub-id": team } })).status).toBe(404);
    expect((await outsider.post("/v1/topics", { name: "Mine", hub_id: newId() })).status).toBe(404);
    expect((await outsider.post("/v1/topics", { name: "Mine" }, { headers: { "x-hub-id": "not-a-uuid" } })).status).toBe(404);

    await h.db.hub.update({ where: { id: team }, data: { allowContributorTopics: true } });
    expect((await carl.post("/v1/topics", { name: "Mine", hub_id: team })).status).toBe(201);
    // The setting is about contributors only.
    expect((await vera.post("/v1/topics", { name: "Vera's", hub_id: team })).status).toBe(403);
    expect(await h.db.topic.count({ where: { hubId: team } })).toBe(1);
  });

  it("refuses a duplicate name in the same hub (ignoring case) but allows it in another hub", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const first = await topic(ann, "Runbooks");
    for (const name of ["Runbooks", " runbooks "]) {
      const dup = await ann.post("/v1/topics", { name });
      expect(dup.status).toBe(409);
      expect(dup.body.error.code).toBe("conflict");
      expect(dup.body.error.details).toEqual({ topic_id: first.id });
    }
    expect((await topic(ann, "Runbooks", team)).hub_id).toBe(team);
    expect(await h.db.topic.count({ where: { hubId: ann.personalHubId } })).toBe(1);
  });

  it(`allows at most ${MAX_TOPICS_PER_HUB} topics per hub`, async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const now = new Date();
    await h.db.topic.createMany({
      data: Array.from({ length: MAX_TOPICS_PER_HUB - 1 }, (_, i) => ({ id: newId(), hubId: team, name: `t${i}`, createdAt: now, updatedAt: now })),
    });
    await topic(ann, "The last one", team);
    const over = await ann.post("/v1/topics", { name: "One too many", hub_id: team });
    expect(over.status).toBe(409);
    expect(over.body.error.code).toBe("conflict");
    expect(over.body.error.message).toContain(String(MAX_TOPICS_PER_HUB));
    expect(over.body.error.details).toEqual({ limit: MAX_TOPICS_PER_HUB });
    expect(await h.db.topic.count({ where: { hubId: team } })).toBe(MAX_TOPICS_PER_HUB);
    // Another hub has its own allowance.
    await topic(ann, "One too many");
  });

  it("rejects bad input with 400 and writes nothing", async () => {
    const ann = await h.user("Ann");
    const cases: [unknown, string][] = [
      [{}, "name"],
      [{ name: "   " }, "name"],
      [{ name: "x".repeat(101) }, "name"],
      [{ name: 42 }, "name"],
      [{ name: "ok", hub_id: "my-team-slug" }, "hub_id"],
    ];
    for (const [body, path] of cases) {
      const res = await ann.post("/v1/topics", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
      expect(res.body.error.details.issues[0].path).toBe(path);
    }
    expect((await ann.post("/v1/topics", undefined, { raw: "{name" })).body.error.code).toBe("invalid_json");
    expect((await ann.post("/v1/topics", undefined, { raw: "[]" })).body.error.code).toBe("invalid_json");
    expect((await topic(ann, "x".repeat(100))).name).toHaveLength(100);
    expect(await h.db.topic.count({ where: { hubId: ann.personalHubId } })).toBe(1);
  });

  it("needs a credential", async () => {
    expect((await h.anonymous.post("/v1/topics", { name: "x" })).status).toBe(401);
    expect((await h.anonymous.get("/v1/topics")).status).toBe(401);
  });
});

describe("list", () => {
  it("lists every readable hub's topics by name with memory counts, or one hub with hub_id", async () => {
    const ann = await h.user("Ann");
    const vera = await h.user("Vera");
    const outsider = await h.user("Otto");
    const team = await h.teamHub(ann, [[vera, "viewer"]]);
    const deploys = await topic(ann, "deploys", team);
    const alpha = await topic(ann, "Alpha", team);
    const personal = await topic(ann, "Beta");
    const hidden = await topic(outsider, "Outsider's");

    const ids = [await memory(ann, "one", team), await memory(ann, "two", team), await memory(ann, "three", team)];
    const moved = await ann.post("/v1/memories/batch-move", { ids: ids.slice(0, 2), topic_id: deploys.id });
    expect(moved.body.data).toEqual({ moved: 2, skipped: [] });
    const pm = await memory(ann, "personal note");
    expect((await ann.post("/v1/memories/batch-move", { ids: [pm], topic_id: personal.id })).body.data.moved).toBe(1);

    const all = await ann.get("/v1/topics");
    expect(all.status).toBe(200);
    expect(all.body.data.has_more).toBe(false);
    expect(all.body.data.next_cursor).toBe("");
    const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    const expected = [
      { ...alpha, memory_count: 0 },
      { ...personal, memory_count: 1 },
      { ...deploys, memory_count: 2 },
    ].sort((a, b) => byName(a.name, b.name));
    expect(all.body.data.topics.map((t: { id: string }) => t.id)).toEqual(expected.map((t) => t.id));
    for (const t of expected) expect(all.body.data.topics).toContainEqual(expect.objectContaining({ id: t.id, memory_count: t.memory_count }));
    expect(all.text).not.toContain(hidden.id);

    const one = await ann.get(`/v1/topics?hub_id=${team}`);
    expect(one.status).toBe(200);
    expect(one.body.data.topics.map((t: { hub_id: string }) => t.hub_id)).toEqual([team, team]);

    // Viewers read topics too, with the same counts.
    const asViewer = await vera.get(`/v1/topics?hub_id=${team}`);
    expect(asViewer.status).toBe(200);
    expect(asViewer.body.data.topics).toEqual(one.body.data.topics);

    const notMember = await outsider.get(`/v1/topics?hub_id=${team}`);
    expect(notMember.status).toBe(404);
    expect(notMember.text).not.toContain(deploys.name);
    const slug = await ann.get("/v1/topics?hub_id=team-slug");
    expect(slug.status).toBe(400);
    expect(slug.body.error.code).toBe("invalid_request");

    // The memories list filters by the topic now that one exists.
    const listed = await ann.get(`/v1/memories?topic_id=${deploys.id}`);
    expect(listed.body.data.memories.map((m: { id: string }) => m.id).sort()).toEqual(ids.slice(0, 2).sort());
  });

  it("paginates with a signed cursor, name then id, bound to its list and user", async () => {
    const ann = await h.user("Ann");
    const bob = await h.user("Bob");
    const team = await h.teamHub(ann);
    const names = Array.from({ length: 7 }, (_, i) => `topic ${String.fromCharCode(103 - i)}`); // g..a, created out of order
    for (const name of names) await topic(ann, name, team);

    const seen: string[] = [];
    let cursor = "";
    let pages = 0;
    do {
      const res = await ann.get(`/v1/topics?hub_id=${team}&limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      expect(res.status).toBe(200);
      pages += 1;
      seen.push(...res.body.data.topics.map((t: { name: string }) => t.name));
      expect(res.body.data.has_more).toBe(res.body.data.next_cursor !== "");
      if (cursor === "") expect(res.body.data.topics).toHaveLength(3);
      cursor = res.body.data.next_cursor;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...names].sort());

    const first = await ann.get(`/v1/topics?hub_id=${team}&limit=2`);
    const next = first.body.data.next_cursor as string;
    expect((await bob.get(`/v1/topics?limit=2&cursor=${encodeURIComponent(next)}`)).body.error.code).toBe("invalid_cursor");
    expect((await ann.get(`/v1/topics?limit=2&cursor=${encodeURIComponent(next)}`)).body.error.code).toBe("invalid_cursor");
    const tampered = `${next.slice(0, -2)}${next.endsWith("AA") ? "BB" : "AA"}`;
    expect((await ann.get(`/v1/topics?hub_id=${team}&cursor=${encodeURIComponent(tampered)}`)).status).toBe(400);
    expect((await ann.get("/v1/topics?limit=0")).body.error.code).toBe("invalid_limit");
    expect((await ann.get("/v1/topics?limit=abc")).body.error.code).toBe("invalid_limit");
    expect((await ann.get(`/v1/topics?hub_id=${team}&limit=1000`)).body.data.topics).toHaveLength(7);
  });
});

describe("rename", () => {
  it("renames, keeps memories attached, and checks duplicates and permissions", async () => {
    const ann = await h.user("Ann");
    const adam = await h.user("Adam");
    const carl = await h.user("Carl");
    const vera = await h.user("Vera");
    const outsider = await h.user("Otto");
    const team = await h.teamHub(ann, [
      [adam, "admin"],
      [carl, "contributor"],
      [vera, "viewer"],
    ]);
    const t = await topic(ann, "Old name", team);
    await topic(ann, "Taken", team);
    const m = await memory(ann, "attached", team);
    await ann.post("/v1/memories/batch-move", { ids: [m], topic_id: t.id });

    const res = await adam.patch(`/v1/topics/${t.id}`, { name: " New name " });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: t.id, hub_id: team, name: "New name", memory_count: 1, created_by: ann.id });
    expect(res.body.data.updated_at >= res.body.data.created_at).toBe(true);
    // A change of case only is not a conflict with itself.
    expect((await ann.patch(`/v1/topics/${t.id}`, { name: "NEW NAME" })).body.data.name).toBe("NEW NAME");

    const dup = await ann.patch(`/v1/topics/${t.id}`, { name: "taken" });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe("conflict");

    expect((await carl.patch(`/v1/topics/${t.id}`, { name: "Carl's" })).status).toBe(403);
    expect((await vera.patch(`/v1/topics/${t.id}`, { name: "Vera's" })).status).toBe(403);
    const stranger = await outsider.patch(`/v1/topics/${t.id}`, { name: "Otto's" });
    expect(stranger.status).toBe(404);
    expect(stranger.text).not.toContain("NEW NAME");
    expect((await ann.patch(`/v1/topics/${newId()}`, { name: "x" })).status).toBe(404);
    expect((await ann.patch("/v1/topics/not-an-id", { name: "x" })).status).toBe(404);
    expect((await ann.patch(`/v1/topics/${t.id}`, { name: "" })).status).toBe(400);
    expect((await ann.patch(`/v1/topics/${t.id}`, {})).status).toBe(400);

    await h.db.hub.update({ where: { id: team }, data: { allowContributorTopics: true } });
    expect((await carl.patch(`/v1/topics/${t.id}`, { name: "Carl's" })).status).toBe(200);
    expect((await h.db.topic.findUnique({ where: { id: t.id } }))?.name).toBe("Carl's");
    expect((await h.db.memory.findUnique({ where: { id: m } }))?.topicId).toBe(t.id);
  });
});

describe("delete", () => {
  it("deletes the topic; its memories stay, without a topic", async () => {
    const ann = await h.user("Ann");
    const vera = await h.user("Vera");
    const outsider = await h.user("Otto");
    const team = await h.teamHub(ann, [[vera, "viewer"]]);
    const t = await topic(ann, "Doomed", team);
    const ids = [await memory(ann, "first", team), await memory(ann, "second", team)];
    await ann.post("/v1/memories/batch-move", { ids, topic_id: t.id });

    expect((await vera.delete(`/v1/topics/${t.id}`)).status).toBe(403);
    expect((await outsider.delete(`/v1/topics/${t.id}`)).status).toBe(404);

    const res = await ann.delete(`/v1/topics/${t.id}`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ id: t.id, deleted: true });
    expect(await h.db.topic.findUnique({ where: { id: t.id } })).toBeNull();
    expect((await ann.delete(`/v1/topics/${t.id}`)).status).toBe(404);

    const listed = await ann.get(`/v1/memories?hub_id=${team}`);
    const memories = listed.body.data.memories as { id: string; topic_id: string | null }[];
    expect(memories.map((m) => m.id).sort()).toEqual([...ids].sort());
    const rows = await h.db.memory.findMany({ where: { id: { in: ids } } });
    expect(rows.map((r) => r.topicId)).toEqual([null, null]);
    expect((await ann.get("/v1/topics")).body.data.topics).toEqual([]);
  });

  it("answers 405 for methods the routes do not implement", async () => {
    const ann = await h.user("Ann");
    expect((await ann.put("/v1/topics", {})).status).toBe(405);
    expect((await ann.get(`/v1/topics/${newId()}`)).status).toBe(405);
  });
});
