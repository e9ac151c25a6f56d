import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { MAX_TOPICS_PER_HUB } from "@/lib/topics/topic-fields.ts";
import { deleteTopic, finishTopicDeletes, SWEEP_GRACE_MS, TOPIC_DELETE_EVENT_EVERY_MS } from "@/lib/topics/delete-topic.ts";
import { newId } from "@/lib/ids.ts";
import { topicsLockKey } from "@/lib/topics/hub-topics.ts";
import { visitTopic } from "@/lib/topics/visit-topic.ts";
import { archiveTopic } from "@/lib/topics/archive-topic.ts";
import { listTopicMemories } from "@/lib/topics/topic-memories.ts";
import { loadRecalled } from "@/lib/recall/load-recalled.ts";
import { getMemoryPage } from "@/lib/memories/get-memory.ts";
import { topicBeingDeletedFor } from "@/lib/topics/topics-being-deleted.ts";
import { indexMemories } from "./recall-helpers.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { clientFor, createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";

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

/** As if the last batch of these topics' delete (or a sweep's attempt) had been `ms` ago. */
async function untouchedFor(ms: number, ids: string[]) {
  await h.db.topic.updateMany({ where: { id: { in: ids } }, data: { deletingAt: new Date(Date.now() - ms) } });
}

/** Branches other tests left marked would go first in a sweep: age them past the grace and finish them all. */
async function finishOtherBranches() {
  await untouchedFor(SWEEP_GRACE_MS + 60_000, (await h.db.topic.findMany({ where: { deletingAt: { not: null } } })).map((row) => row.id));
  while ((await finishTopicDeletes(h.db, 1)) > 0);
}

async function memory(client: Client, content: string, hubId?: string): Promise<string> {
  const res = await client.post("/v1/memories", { content }, hubId ? { headers: { "x-hub-id": hubId } } : {});
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

/** Five new memories of `client` (contents starting with `label`) filed into `topicId`. */
async function filedMemories(client: Client, topicId: string, label: string, hubId?: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push(await memory(client, `${label} ${i} ${Math.random()}`, hubId));
  expect((await client.post("/v1/memories/batch-move", { ids, topic_id: topicId })).body.data.moved).toBe(5);
  return ids;
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
      owner_id: ann.id,
      parent_id: null,
      name: "Deploys",
      description: "",
      icon: "",
      position: 0,
      pinned: false,
      user_modified: false,
      memory_count: 0,
      total_memory_count: 0,
      children: [],
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

  it("refuses a duplicate name among siblings (ignoring case) but allows it under another parent or hub", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const first = await topic(ann, "Runbooks");
    for (const name of ["Runbooks", " runbooks "]) {
      const dup = await ann.post("/v1/topics", { name });
      expect(dup.status).toBe(409);
      expect(dup.body.error.code).toBe("duplicate_name");
      expect(dup.body.error.details).toEqual({ topic_id: first.id, parent_id: null });
    }
    expect((await topic(ann, "Runbooks", team)).hub_id).toBe(team);
    const nested = await ann.post("/v1/topics", { name: "runbooks", parent_id: first.id });
    expect(nested.status).toBe(201);
    expect(nested.body.data).toMatchObject({ parent_id: first.id, hub_id: ann.personalHubId });
    expect(await h.db.topic.count({ where: { hubId: ann.personalHubId } })).toBe(2);
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
      [{ name: "ok", parent_id: "nope" }, "parent_id"],
      [{ name: "ok", position: -1 }, "position"],
      [{ name: "ok", pinned: "yes" }, "pinned"],
      [{ name: "ok", icon: "x".repeat(65) }, "icon"],
      [{ name: "ok", description: "x".repeat(2001) }, "description"],
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

describe("tree", () => {
  it("a topic going last after a sibling at the highest position stays within the documented positions", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const top = (await ann.post("/v1/topics", { name: "Top", hub_id: team, position: 1_000_000 })).body.data;
    const next = await ann.post("/v1/topics", { name: "Next", hub_id: team });
    expect(next.status, next.text).toBe(201);
    // Past 1,000,000 the client could not send the position it was given back (a 400 on PATCH and reorder).
    expect(next.body.data.position).toBe(1_000_000);
    const moved = (await ann.post("/v1/topics", { name: "Moved", hub_id: team })).body.data;
    const child = (await ann.post("/v1/topics", { name: "Child", parent_id: moved.id, position: 1_000_000 })).body.data;
    expect((await ann.patch(`/v1/topics/${child.id}`, { parent_id: null })).body.data.position).toBe(1_000_000);
    expect((await ann.patch(`/v1/topics/${next.body.data.id}`, { position: next.body.data.position })).status).toBe(200);
    expect(top.position).toBe(1_000_000);
  });

  it("lists one hub's whole tree with own and branch memory counts and the unassigned count", async () => {
    const ann = await h.user("Ann");
    const vera = await h.user("Vera");
    const outsider = await h.user("Otto");
    const team = await h.teamHub(ann, [[vera, "viewer"]]);
    const eng = (await ann.post("/v1/topics", { name: "Engineering", hub_id: team, icon: "cpu", description: "All things eng" })).body.data;
    const deploys = (await ann.post("/v1/topics", { name: "Deploys", parent_id: eng.id, pinned: true })).body.data;
    const alpha = (await ann.post("/v1/topics", { name: "Alpha", parent_id: eng.id })).body.data;
    const zeta = (await ann.post("/v1/topics", { name: "Zeta", hub_id: team, position: 0 })).body.data;
    // The parent's hub is the hub; positions follow creation order among siblings.
    expect(deploys).toMatchObject({ hub_id: team, parent_id: eng.id, position: 0, pinned: true });
    expect(alpha.position).toBe(1);
    const m1 = await memory(ann, "one", team);
    const m2 = await memory(ann, "two", team);
    await memory(ann, "three", team);
    await ann.post("/v1/memories/batch-move", { ids: [m1], topic_id: deploys.id });
    await ann.post("/v1/memories/batch-move", { ids: [m2], topic_id: eng.id });
    await topic(ann, "Personal only");

    const res = await vera.get(`/v1/topics?hub_id=${team}`);
    expect(res.status).toBe(200);
    const tree = res.body.data;
    expect(tree.unassigned_count).toBe(1);
    // Siblings by position, then name: both roots sit at position 0.
    expect(tree.topics.map((t: { name: string }) => t.name)).toEqual(["Engineering", "Zeta"]);
    const engNode = tree.topics.find((t: { id: string }) => t.id === eng.id);
    expect(engNode).toMatchObject({ name: "Engineering", icon: "cpu", description: "All things eng", parent_id: null, memory_count: 1, total_memory_count: 2 });
    expect(engNode.children.map((c: { name: string; memory_count: number; children: unknown[] }) => [c.name, c.memory_count, c.children])).toEqual([
      ["Deploys", 1, []],
      ["Alpha", 0, []],
    ]);
    expect(tree.topics.find((t: { id: string }) => t.id === zeta.id)).toMatchObject({ memory_count: 0, total_memory_count: 0, children: [] });
    // The same tree through X-Hub-ID; without either it is the personal hub's.
    expect((await vera.get("/v1/topics", { headers: { "x-hub-id": team } })).body.data).toEqual(tree);
    expect((await ann.get("/v1/topics")).body.data.topics.map((t: { name: string }) => t.name)).toEqual(["Personal only"]);
    // The whole tree, whatever paging a client asks for.
    expect((await vera.get(`/v1/topics?hub_id=${team}&limit=1`)).body.data.topics).toHaveLength(2);

    const outside = await outsider.get(`/v1/topics?hub_id=${team}`);
    expect(outside.status).toBe(404);
    expect(outside.text).not.toContain("Engineering");
    expect((await ann.get("/v1/topics?hub_id=my-slug")).status).toBe(400);
  });

  it("gets one topic, and pages the memories filed under it", async () => {
    const ann = await h.user("Ann");
    const vera = await h.user("Vera");
    const outsider = await h.user("Otto");
    const team = await h.teamHub(ann, [[vera, "viewer"]]);
    const parent = await topic(ann, "Parent", team);
    const child = (await ann.post("/v1/topics", { name: "Child", parent_id: parent.id })).body.data;
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await memory(ann, `filed ${i}`, team));
    await ann.post("/v1/memories/batch-move", { ids, topic_id: parent.id });
    const inChild = await memory(ann, "in the child", team);
    await ann.post("/v1/memories/batch-move", { ids: [inChild], topic_id: child.id });

    const got = await vera.get(`/v1/topics/${parent.id}`);
    expect(got.status).toBe(200);
    expect(got.body.data).toMatchObject({ id: parent.id, name: "Parent", memory_count: 3, total_memory_count: 4, parent_id: null });
    expect((await outsider.get(`/v1/topics/${parent.id}`)).status).toBe(404);
    expect((await ann.get(`/v1/topics/${newId()}`)).status).toBe(404);

    const p1 = await vera.get(`/v1/topics/${parent.id}/memories?limit=2`);
    expect(p1.status).toBe(200);
    expect(p1.body.data.memories).toHaveLength(2);
    expect(p1.body.data.has_more).toBe(true);
    const p2 = await vera.get(`/v1/topics/${parent.id}/memories?limit=2&cursor=${encodeURIComponent(p1.body.data.next_cursor)}`);
    expect(p2.body.data).toMatchObject({ has_more: false, next_cursor: "" });
    const seen = [...p1.body.data.memories, ...p2.body.data.memories].map((m: { id: string }) => m.id);
    expect(seen.sort()).toEqual([...ids].sort());
    expect(p1.body.data.memories[0]).toMatchObject({ topic_id: parent.id, hub_id: team });
    expect(p1.body.data.memories[0]).not.toHaveProperty("content");
    // A cursor of one topic's list is refused on another's.
    expect((await vera.get(`/v1/topics/${child.id}/memories?cursor=${encodeURIComponent(p1.body.data.next_cursor)}`)).body.error.code).toBe("invalid_cursor");
    expect((await outsider.get(`/v1/topics/${parent.id}/memories`)).status).toBe(404);
  });

  it("nests at most 5 levels and refuses parents in other hubs", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    let parent: string | undefined;
    const chain: string[] = [];
    for (let level = 0; level < 5; level++) {
      const res = await ann.post("/v1/topics", { name: `L${level}`, hub_id: team, ...(parent && { parent_id: parent }) });
      expect(res.status, res.text).toBe(201);
      parent = res.body.data.id;
      chain.push(parent!);
    }
    const deep = await ann.post("/v1/topics", { name: "L5", parent_id: parent });
    expect(deep.status).toBe(400);
    expect(deep.body.error.code).toBe("max_depth");
    const elsewhere = await ann.post("/v1/topics", { name: "X", hub_id: ann.personalHubId, parent_id: chain[0] });
    expect(elsewhere.body.error.code).toBe("invalid_parent");
    expect((await ann.post("/v1/topics", { name: "X", parent_id: newId() })).body.error.code).toBe("invalid_parent");
    expect(await h.db.topic.count({ where: { hubId: team } })).toBe(5);
  });

  it("moves branches: no cycles, no deeper than 5 levels, names free at the destination, root with null or \"\"", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const make = async (name: string, parent_id?: string) => (await ann.post("/v1/topics", { name, hub_id: team, ...(parent_id && { parent_id }) })).body.data.id as string;
    const a = await make("A");
    const b = await make("B", a);
    const c = await make("C", b);
    const d = await make("D");
    const e = await make("E", d);
    await make("F", e);
    const dupe = await make("C", d);

    expect((await ann.patch(`/v1/topics/${a}`, { parent_id: c })).body.error.code).toBe("cycle_detected");
    expect((await ann.patch(`/v1/topics/${a}`, { parent_id: a })).body.error.code).toBe("cycle_detected");
    // A (3 levels) under F (level 2) would reach level 5.
    const tooDeep = await ann.patch(`/v1/topics/${a}`, { parent_id: (await h.db.topic.findFirstOrThrow({ where: { hubId: team, name: "F" } })).id });
    expect(tooDeep.status).toBe(400);
    expect(tooDeep.body.error.code).toBe("max_depth_subtree");
    expect((await ann.patch(`/v1/topics/${c}`, { parent_id: d })).body.error.code).toBe("duplicate_name");
    expect((await ann.patch(`/v1/topics/${a}`, { parent_id: ann.personalHubId })).body.error.code).toBe("invalid_parent");

    const moved = await ann.patch(`/v1/topics/${b}`, { parent_id: e });
    expect(moved.status).toBe(200);
    expect(moved.body.data).toMatchObject({ parent_id: e, user_modified: true });
    expect((await h.db.topic.findUniqueOrThrow({ where: { id: c } })).parentId).toBe(b);
    expect((await ann.patch(`/v1/topics/${b}`, { parent_id: "" })).body.data.parent_id).toBeNull();
    expect((await ann.patch(`/v1/topics/${dupe}`, { parent_id: null, position: 7, pinned: true, icon: "star", description: "d" })).body.data).toMatchObject({
      parent_id: null,
      position: 7,
      pinned: true,
      icon: "star",
      description: "d",
    });
    const tree = (await ann.get(`/v1/topics?hub_id=${team}`)).body.data.topics;
    // A move to a new parent lands last among its new siblings unless a position is given.
    expect(tree.map((t: { name: string }) => t.name)).toEqual(["A", "D", "B", "C"]);
  });

  it("records each member's visit to a topic (Memax's topics.markVisit); outsiders get not_found", async () => {
    const ann = await h.user("Ann");
    const vera = await h.user("Vera");
    const out = await h.user("Out");
    const team = await h.teamHub(ann, [[vera, "viewer"]]);
    const t = await topic(ann, "Visited", team);
    const first = await vera.post(`/v1/topics/${t.id}/visit`, {});
    expect(first.status, first.text).toBe(200);
    expect(first.body.data).toEqual({ topic_id: t.id, visited_at: expect.any(String), status: "ok" });
    const again = await vera.post(`/v1/topics/${t.id}/visit`, {});
    expect(new Date(again.body.data.visited_at).getTime()).toBeGreaterThanOrEqual(new Date(first.body.data.visited_at).getTime());
    // One row per topic and member, holding the latest visit.
    const rows = await h.db.topicVisit.findMany({ where: { topicId: t.id } });
    expect(rows).toEqual([{ topicId: t.id, userId: vera.id, visitedAt: new Date(again.body.data.visited_at) }]);
    expect((await out.post(`/v1/topics/${t.id}/visit`, {})).status).toBe(404);
    expect((await out.post(`/v1/topics/not-a-uuid/visit`, {})).status).toBe(404);
    expect(await h.db.topicVisit.count({ where: { userId: out.id } })).toBe(0);
    // Gone with the topic.
    expect((await ann.delete(`/v1/topics/${t.id}`)).status).toBe(200);
    expect(await h.db.topicVisit.count({ where: { topicId: t.id } })).toBe(0);
  });

  /**
   * The visit checked the topic before its statement and inserted from the topic row whatever its state:
   * a delete that marked the topic in between (its first batch) let the visit answer 200 for a topic
   * every other read answers 404, and stored a visit of it.
   */
  it("a topic being deleted is not_found to a visit, also when its delete begins between the check and the write", async () => {
    const ann = await h.user("Ann");
    const hidden = await topic(ann, "Hidden");
    await h.db.topic.update({ where: { id: hidden.id }, data: { deletingAt: new Date() } });
    expect((await ann.post(`/v1/topics/${hidden.id}/visit`, {})).status).toBe(404);
    const t = await topic(ann, "Going");
    const db = changedBefore(h.db, ["$queryRaw"], () => h.db.topic.update({ where: { id: t.id }, data: { deletingAt: new Date() } }));
    await expect(visitTopic(sessionContext(h, ann, db), t.id)).rejects.toMatchObject({ code: "not_found" });
    expect(await h.db.topicVisit.count({ where: { topicId: { in: [hidden.id, t.id] } } })).toBe(0);
  });

  it("a visit stamped before the stored one (a request that committed late, another process's clock) keeps the latest", async () => {
    const ann = await h.user("Ann");
    const t = await topic(ann, "Revisited");
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const start = Date.now();
      vi.setSystemTime(start + 60_000);
      const later = await ann.post(`/v1/topics/${t.id}/visit`, {});
      expect(later.status, later.text).toBe(200);
      vi.setSystemTime(start);
      const earlier = await ann.post(`/v1/topics/${t.id}/visit`, {});
      expect(earlier.status, earlier.text).toBe(200);
      // The answer is what is stored: the latest visit, not the late request's own instant.
      expect(earlier.body.data.visited_at).toBe(new Date(start + 60_000).toISOString());
      expect((await h.db.topicVisit.findFirstOrThrow({ where: { topicId: t.id, userId: ann.id } })).visitedAt).toEqual(new Date(start + 60_000));
    } finally {
      vi.useRealTimers();
    }
  });

  it("a key limited to some hubs finds a topic of the owner's other hubs no more than a topic that does not exist", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const personal = await topic(ann, "Private");
    const teamKey = clientFor((await ann.post("/v1/auth/api-keys", { name: "team bot", hub_id: team })).body.data.key);
    const unknown = newId();
    for (const path of ["", "/memories", "/visit"]) {
      const method = path === "/visit" ? "post" : "get";
      const missing = await teamKey[method](`/v1/topics/${unknown}${path}`, ...(method === "post" ? [{}] : []));
      const hidden = await teamKey[method](`/v1/topics/${personal.id}${path}`, ...(method === "post" ? [{}] : []));
      expect([hidden.status, hidden.body.error]).toEqual([missing.status, missing.body.error]);
      expect(hidden.status).toBe(404);
    }
    const missingParent = await teamKey.post("/v1/topics", { name: "Child", parent_id: unknown });
    const hiddenParent = await teamKey.post("/v1/topics", { name: "Child", parent_id: personal.id });
    expect([hiddenParent.status, hiddenParent.body.error]).toEqual([missingParent.status, { ...missingParent.body.error, details: { parent_id: personal.id } }]);
    expect(await h.db.topic.count({ where: { hubId: { in: [team, ann.personalHubId] }, name: "Child" } })).toBe(0);
    // A reorder's first topic names the hub it acts on: one of the owner's other hubs is as unknown as no topic.
    const missingMove = await teamKey.post("/v1/topics/reorder", { operations: [{ topic_id: unknown, position: 3 }] });
    const hiddenMove = await teamKey.post("/v1/topics/reorder", { operations: [{ topic_id: personal.id, position: 3 }] });
    expect([hiddenMove.status, hiddenMove.body.error]).toEqual([missingMove.status, { ...missingMove.body.error, details: { index: 0, topic_id: personal.id } }]);
    expect(hiddenMove.status).toBe(404);
    expect((await h.db.topic.findUniqueOrThrow({ where: { id: personal.id } })).position).toBe(0);
  });

  it("archives and restores whole branches; archived topics are read-only and leave the tree", async () => {
    const ann = await h.user("Ann");
    const vera = await h.user("Vera");
    const team = await h.teamHub(ann, [[vera, "viewer"]]);
    const root = await topic(ann, "Root", team);
    const kid = (await ann.post("/v1/topics", { name: "Kid", parent_id: root.id })).body.data;
    const m = await memory(ann, "kept", team);
    await ann.post("/v1/memories/batch-move", { ids: [m], topic_id: kid.id });

    expect((await vera.post(`/v1/topics/${root.id}/archive`)).status).toBe(403);
    const archived = await ann.post(`/v1/topics/${root.id}/archive`);
    expect(archived.body.data).toEqual({ topic_id: root.id, archived_count: 2 });
    expect((await ann.post(`/v1/topics/${root.id}/archive`)).body.data).toEqual({ topic_id: root.id, archived_count: 0 });
    expect((await ann.get(`/v1/topics?hub_id=${team}`)).body.data).toEqual({ topics: [], unassigned_count: 0 });
    const list = await vera.get(`/v1/topics/archived?hub_id=${team}`);
    expect(list.body.data.topics.map((t: { id: string; archived_at: string }) => [t.id, typeof t.archived_at])).toEqual(
      expect.arrayContaining([
        [root.id, "string"],
        [kid.id, "string"],
      ]),
    );
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: m } })).topicId).toBe(kid.id);
    expect((await ann.patch(`/v1/topics/${root.id}`, { name: "No" })).body.error.code).toBe("topic_archived");
    expect((await ann.post("/v1/topics", { name: "Under", parent_id: root.id })).body.error.code).toBe("parent_archived");
    expect((await ann.post(`/v1/topics/${kid.id}/memories`, { memory_id: m })).body.error.code).toBe("topic_archived");
    const move = await ann.post("/v1/memories/batch-move", { ids: [m], topic_id: root.id });
    expect([move.status, move.body.error.code]).toEqual([409, "topic_archived"]);

    // Restoring the child alone re-plants it at the root, under a parent that is still hidden.
    const kidBack = await ann.post(`/v1/topics/${kid.id}/restore`);
    expect(kidBack.body.data).toEqual({ topic_id: kid.id, restored_count: 1 });
    expect((await ann.get(`/v1/topics/${kid.id}`)).body.data).toMatchObject({ parent_id: null, memory_count: 1 });
    expect((await ann.post(`/v1/topics/${root.id}/restore`)).body.data).toEqual({ topic_id: root.id, restored_count: 1 });
    expect((await ann.post(`/v1/topics/${root.id}/restore`)).body.data).toEqual({ topic_id: root.id, restored_count: 0 });
    expect((await ann.get(`/v1/topics/archived?hub_id=${team}`)).body.data.topics).toEqual([]);
    const names = (await ann.get(`/v1/topics?hub_id=${team}`)).body.data.topics.map((t: { name: string }) => t.name).sort();
    expect(names).toEqual(["Kid", "Root"]);
  });

  /**
   * The archive read the branch under the lock without checking the topic was still there: deleted, or
   * its delete begun, between the check and the transaction, it answered 200 archived_count 0 (as for a
   * branch already archived) for a topic every request answers 404.
   */
  it("archiving a topic deleted, or whose delete began, since its check is not_found", async () => {
    const ann = await h.user("Ann");
    for (const change of ["marked", "deleted"] as const) {
      const t = await topic(ann, `Archive ${change}`);
      const db = changedBefore(h.db, ["$transaction"], () =>
        change === "marked" ? h.db.$executeRaw`UPDATE topics SET deleting_at = now() WHERE id = ${t.id}::uuid` : h.db.topic.delete({ where: { id: t.id } }),
      );
      await expect(archiveTopic(sessionContext(h, ann, db), t.id), change).rejects.toMatchObject({ code: "not_found" });
    }
  });

  it("an active topic's total_memory_count is the tree's: an archived subtopic's memories are left out of both; an archived topic counts its archived branch", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const root = await topic(ann, "Shelf", team);
    const kept = (await ann.post("/v1/topics", { name: "Kept", parent_id: root.id })).body.data;
    const shelved = (await ann.post("/v1/topics", { name: "Shelved", parent_id: root.id })).body.data;
    const deep = (await ann.post("/v1/topics", { name: "Deep", parent_id: shelved.id })).body.data;
    for (const [where, n] of [
      [root.id, 1],
      [kept.id, 2],
      [shelved.id, 3],
      [deep.id, 4],
    ] as const) {
      const ids = [];
      for (let i = 0; i < n; i++) ids.push(await memory(ann, `${where} ${i}`, team));
      expect((await ann.post("/v1/memories/batch-move", { ids, topic_id: where })).status).toBe(200);
    }
    expect((await ann.post(`/v1/topics/${shelved.id}/archive`)).body.data.archived_count).toBe(2);
    const [node] = (await ann.get(`/v1/topics?hub_id=${team}`)).body.data.topics;
    expect(node).toMatchObject({ id: root.id, memory_count: 1, total_memory_count: 3 });
    expect((await ann.get(`/v1/topics/${root.id}`)).body.data).toMatchObject({ memory_count: 1, total_memory_count: node.total_memory_count });
    // An archived topic's branch is archived with it, and comes back with it: it counts that branch.
    expect((await ann.get(`/v1/topics/${shelved.id}`)).body.data).toMatchObject({ memory_count: 3, total_memory_count: 7 });
  });

  it("assigns and unassigns memories, reorders many topics at once", async () => {
    const ann = await h.user("Ann");
    const carl = await h.user("Carl");
    const vera = await h.user("Vera");
    const team = await h.teamHub(ann, [
      [carl, "contributor"],
      [vera, "viewer"],
    ]);
    const t = await topic(ann, "Inbox zero", team);
    const u = await topic(ann, "Other", team);
    const mine = await memory(carl, "carl's own", team);
    const annS = await memory(ann, "ann's", team);
    const personal = await memory(ann, "elsewhere");

    const assigned = await carl.post(`/v1/topics/${t.id}/memories`, { memory_id: mine, confidence: 0.9 });
    expect(assigned.status).toBe(200);
    expect(assigned.body.data).toEqual({ topic_id: t.id, memory_id: mine, assigned: true, previous_topic_id: null });
    expect((await carl.post(`/v1/topics/${t.id}/memories`, { memory_id: annS })).status).toBe(403);
    expect((await vera.post(`/v1/topics/${t.id}/memories`, { memory_id: mine })).status).toBe(403);
    expect((await ann.post(`/v1/topics/${t.id}/memories`, { memory_id: personal })).status).toBe(404);
    expect((await ann.get(`/v1/topics/${t.id}`)).body.data.memory_count).toBe(1);

    expect((await ann.delete(`/v1/topics/${u.id}/memories/${mine}`)).body.data).toEqual({ topic_id: u.id, memory_id: mine, unassigned: false });
    expect((await carl.delete(`/v1/topics/${t.id}/memories/${mine}`)).body.data).toEqual({ topic_id: t.id, memory_id: mine, unassigned: true });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: mine } })).topicId).toBeNull();

    const reordered = await ann.post("/v1/topics/reorder", {
      operations: [
        { topic_id: u.id, position: 0 },
        { topic_id: t.id, position: 1, parent_id: u.id },
      ],
    });
    expect(reordered.status).toBe(200);
    expect(reordered.body.data).toEqual({ hub_id: team, updated: 2 });
    const tree = (await ann.get(`/v1/topics?hub_id=${team}`)).body.data.topics;
    expect(tree).toHaveLength(1);
    expect(tree[0]).toMatchObject({ id: u.id, children: [expect.objectContaining({ id: t.id, position: 1 })] });
    // All or nothing: a cycle in the second operation leaves the first undone.
    const bad = await ann.post("/v1/topics/reorder", {
      operations: [
        { topic_id: t.id, position: 5 },
        { topic_id: u.id, position: 0, parent_id: t.id },
      ],
    });
    expect(bad.body.error.code).toBe("cycle_detected");
    expect((await h.db.topic.findUniqueOrThrow({ where: { id: t.id } })).position).toBe(1);
    expect((await vera.post("/v1/topics/reorder", { operations: [{ topic_id: t.id, position: 0 }] })).status).toBe(403);
    // Unknown keys inside an operation are ignored and reported, as at the top level; known ones keep their checks.
    const extra = await ann.post("/v1/topics/reorder", { operations: [{ topic_id: t.id, position: 1, parent_id: u.id, colour: "red" }], dry: false });
    expect(extra.status, extra.text).toBe(200);
    expect(extra.headers.get("x-engram-warning")).toBe("ignored unknown fields: operations.0.colour, dry");
    const wrong = await ann.post("/v1/topics/reorder", { operations: [{ topic_id: t.id, position: -1, colour: "red" }] });
    expect(wrong.body.error.details.issues).toEqual([{ path: "operations.0.position", message: expect.any(String) }]);
  });
});

describe("reorder", () => {
  /**
   * `updated` was the number of operations sent, so a client sending its whole order back after moving
   * one topic (or the same topic twice) was told every topic had changed.
   */
  it("answers updated as the topics it changed: not operations that set what was there, nor a topic twice", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const a = await topic(ann, "A", team);
    const b = await topic(ann, "B", team);
    const c = await topic(ann, "C", team);
    const positions = async () => (await h.db.topic.findMany({ where: { id: { in: [a.id, b.id, c.id] } }, orderBy: { name: "asc" } })).map((t) => t.position);
    expect(await positions()).toEqual([0, 1, 2]);
    const whole = await ann.post("/v1/topics/reorder", {
      operations: [
        { topic_id: a.id, position: 0 },
        { topic_id: b.id, position: 1 },
        { topic_id: c.id, position: 5 },
      ],
    });
    expect(whole.status, whole.text).toBe(200);
    expect(whole.body.data).toEqual({ hub_id: team, updated: 1 });
    const twice = await ann.post("/v1/topics/reorder", {
      operations: [
        { topic_id: a.id, position: 3 },
        { topic_id: a.id, position: 4 },
      ],
    });
    expect(twice.body.data).toEqual({ hub_id: team, updated: 1 });
    const none = await ann.post("/v1/topics/reorder", { operations: [{ topic_id: b.id, position: 1, parent_id: null }] });
    expect(none.body.data).toEqual({ hub_id: team, updated: 0 });
    expect(await positions()).toEqual([4, 1, 5]);
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
    expect(dup.body.error.code).toBe("duplicate_name");

    expect((await carl.patch(`/v1/topics/${t.id}`, { name: "Carl's" })).status).toBe(403);
    expect((await vera.patch(`/v1/topics/${t.id}`, { name: "Vera's" })).status).toBe(403);
    const stranger = await outsider.patch(`/v1/topics/${t.id}`, { name: "Otto's" });
    expect(stranger.status).toBe(404);
    expect(stranger.text).not.toContain("NEW NAME");
    expect((await ann.patch(`/v1/topics/${newId()}`, { name: "x" })).status).toBe(404);
    expect((await ann.patch("/v1/topics/not-an-id", { name: "x" })).status).toBe(404);
    // "" in an optional field means absent: the name stays.
    expect((await ann.patch(`/v1/topics/${t.id}`, { name: "" })).body.data.name).toBe("NEW NAME");
    expect((await ann.patch(`/v1/topics/${t.id}`, { name: "   " })).status).toBe(400);
    // An empty patch changes nothing.
    expect((await ann.patch(`/v1/topics/${t.id}`, {})).body.data.name).toBe("NEW NAME");

    await h.db.hub.update({ where: { id: team }, data: { allowContributorTopics: true } });
    expect((await carl.patch(`/v1/topics/${t.id}`, { name: "Carl's" })).status).toBe(200);
    expect((await h.db.topic.findUnique({ where: { id: t.id } }))?.name).toBe("Carl's");
    expect((await h.db.memory.findUnique({ where: { id: m } }))?.topicId).toBe(t.id);
  });
});

describe("delete", () => {
  it("deletes the topic with its subtopics; their memories stay, without a topic", async () => {
    const ann = await h.user("Ann");
    const vera = await h.user("Vera");
    const outsider = await h.user("Otto");
    const team = await h.teamHub(ann, [[vera, "viewer"]]);
    const t = await topic(ann, "Doomed", team);
    const sub = (await ann.post("/v1/topics", { name: "Sub", parent_id: t.id })).body.data;
    const ids = [await memory(ann, "first", team), await memory(ann, "second", team)];
    await ann.post("/v1/memories/batch-move", { ids: [ids[0]], topic_id: t.id });
    await ann.post("/v1/memories/batch-move", { ids: [ids[1]], topic_id: sub.id });

    expect((await vera.delete(`/v1/topics/${t.id}`)).status).toBe(403);
    expect((await outsider.delete(`/v1/topics/${t.id}`)).status).toBe(404);

    const res = await ann.delete(`/v1/topics/${t.id}`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ id: t.id, topic_id: t.id, deleted: true, deleted_count: 2 });
    expect(await h.db.topic.findUnique({ where: { id: t.id } })).toBeNull();
    expect(await h.db.topic.findUnique({ where: { id: sub.id } })).toBeNull();
    expect((await ann.delete(`/v1/topics/${t.id}`)).status).toBe(404);

    const listed = await ann.get(`/v1/memories?hub_id=${team}`);
    const memories = listed.body.data.memories as { id: string; topic_id: string | null }[];
    expect(memories.map((m) => m.id).sort()).toEqual([...ids].sort());
    const rows = await h.db.memory.findMany({ where: { id: { in: ids } } });
    expect(rows.map((r) => r.topicId)).toEqual([null, null]);
    expect((await ann.get(`/v1/topics?hub_id=${team}`)).body.data).toEqual({ topics: [], unassigned_count: 2 });
  });

  it("a delete that finds the topic already gone (deleted by another request meanwhile) announces nothing", async () => {
    const ann = await h.user("Ann");
    const t = await topic(ann, "Twice");
    const changes = () => h.db.event.count({ where: { type: "topic.changed", entityId: t.id } });
    const before = await changes();
    // The other delete commits between this one's permission check and its transaction.
    const db = changedBefore(h.db, ["$transaction"], () => h.db.topic.delete({ where: { id: t.id } }));
    const result = await deleteTopic(sessionContext(h, ann, db), t.id);
    expect(result).toEqual({ id: t.id, topic_id: t.id, deleted: true, deleted_count: 0 });
    expect(await changes()).toBe(before);
  });

  /**
   * Each batch read the branch again and committed on its own: a subtopic moved out between two
   * batches had some of its memories unfiled, and was kept, its filing lost with no undo. The
   * branch is now fixed by the first batch (its topics marked as being deleted): moving one out, or
   * filing into one, is refused. Here the move lands right before the second batch.
   */
  it("a subtopic cannot be moved out between two batches; the whole branch goes with all its memories unfiled", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const a = await topic(ann, "Parent", team);
    const b = (await ann.post("/v1/topics", { name: "Child", parent_id: a.id })).body.data as { id: string };
    const other = await topic(ann, "Other", team);
    const loose = await memory(ann, `loose ${Math.random()}`, team);
    const ids = await filedMemories(ann, b.id, "child", team);
    vi.stubEnv("ENGRAM_PURGE_BATCH", "2");
    const answers: Record<string, number | string> = {};
    let calls = 0;
    const db = new Proxy(h.db, {
      get(target, key) {
        const real = Reflect.get(target, key) as unknown;
        if (key !== "$transaction" || typeof real !== "function") return real;
        return async (...args: unknown[]) => {
          if (++calls === 2) {
            answers.move = (await ann.patch(`/v1/topics/${b.id}`, { parent_id: null })).status;
            answers.rename = (await ann.patch(`/v1/topics/${b.id}`, { name: "Renamed" })).status;
            answers.under = (await ann.patch(`/v1/topics/${other.id}`, { parent_id: b.id })).status;
            answers.file = (await ann.post(`/v1/topics/${b.id}/memories`, { memory_id: loose })).status;
            answers.batch = (await ann.post("/v1/memories/batch-move", { ids: [loose], topic_id: b.id })).status;
            answers.get = (await ann.get(`/v1/topics/${b.id}`)).status;
            answers.listed = JSON.stringify((await ann.get(`/v1/topics?hub_id=${team}`)).body.data.topics.map((t: { name: string }) => t.name));
          }
          return (real as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    try {
      const result = await deleteTopic(sessionContext(h, ann, db), a.id);
      expect(result).toEqual({ id: a.id, topic_id: a.id, deleted: true, deleted_count: 2 });
    } finally {
      vi.unstubAllEnvs();
    }
    expect(answers).toEqual({ move: 404, rename: 404, under: 400, file: 404, batch: 404, get: 404, listed: JSON.stringify(["Other"]) });
    expect(await h.db.topic.count({ where: { id: { in: [a.id, b.id] } } })).toBe(0);
    expect(await h.db.memory.count({ where: { id: { in: [...ids, loose] }, topicId: { not: null } } })).toBe(0);
    expect((await h.db.topic.findUniqueOrThrow({ where: { id: other.id } })).parentId).toBeNull();
  });

  /**
   * A delete cut short after its first batch (the request's time ran out, the process stopped) left
   * its branch hidden, with the rest of its memories filed under topics no one sees and no client
   * would send the delete for again. The sweep finishes it, as it finishes a deleted hub.
   */
  it("a delete cut short is finished by the sweep: the hidden branch goes, every memory unfiled", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const a = await topic(ann, "Stopped", team);
    const b = (await ann.post("/v1/topics", { name: "Below", parent_id: a.id })).body.data as { id: string };
    const ids = await filedMemories(ann, b.id, "stopped", team);
    vi.stubEnv("ENGRAM_PURGE_BATCH", "2");
    let calls = 0;
    // The process stops before the second batch: the first is committed, nothing more happens.
    const db = new Proxy(h.db, {
      get(target, key) {
        const real = Reflect.get(target, key) as unknown;
        if (key !== "$transaction" || typeof real !== "function") return real;
        return (...args: unknown[]) => (++calls === 2 ? Promise.reject(new Error("stopped")) : (real as (...a: unknown[]) => unknown).apply(target, args));
      },
    });
    try {
      await expect(deleteTopic(sessionContext(h, ann, db), a.id)).rejects.toThrow("stopped");
      expect(await h.db.memory.count({ where: { id: { in: ids }, topicId: b.id } })).toBe(3);
      expect((await ann.get(`/v1/topics?hub_id=${team}`)).body.data.topics).toEqual([]);
      // Not before the grace has passed with no batch: it may be a delete still running.
      expect(await finishTopicDeletes(h.db)).toBe(0);
      await untouchedFor(SWEEP_GRACE_MS + 60_000, [a.id, b.id]);
      expect(await finishTopicDeletes(h.db)).toBe(1);
    } finally {
      vi.unstubAllEnvs();
    }
    expect(await h.db.topic.count({ where: { id: { in: [a.id, b.id] } } })).toBe(0);
    expect(await h.db.memory.count({ where: { id: { in: ids }, topicId: { not: null } } })).toBe(0);
    expect((await ann.get(`/v1/topics?hub_id=${team}`)).body.data.unassigned_count).toBe(5);
    expect(await finishTopicDeletes(h.db)).toBe(0);
  });

  /**
   * The sweep took every marked branch, deletes still running in their request too (every instance
   * sweeps at start): the two alternated batches and the request answered deleted_count 0 for a delete
   * it had almost all done. A branch is now the sweep's only once no batch has stamped it for the grace.
   */
  it("the sweep leaves a delete still running alone, however long ago it began", async () => {
    const ann = await h.user("Ann");
    const t = await topic(ann, "Long");
    const ids = await filedMemories(ann, t.id, "long");
    vi.stubEnv("ENGRAM_PURGE_BATCH", "2");
    let calls = 0;
    const swept: number[] = [];
    const db = new Proxy(h.db, {
      get(target, key) {
        const real = Reflect.get(target, key) as unknown;
        if (key !== "$transaction" || typeof real !== "function") return real;
        return async (...args: unknown[]) => {
          // Its first batch committed long ago; the second, about to run, is a sign of life.
          if (++calls === 2) await untouchedFor(SWEEP_GRACE_MS + 60_000, [t.id]);
          if (calls === 3) swept.push(await finishTopicDeletes(h.db));
          return (real as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    try {
      expect(await deleteTopic(sessionContext(h, ann, db), t.id)).toEqual({ id: t.id, topic_id: t.id, deleted: true, deleted_count: 1 });
    } finally {
      vi.unstubAllEnvs();
    }
    expect(swept).toEqual([0]);
    expect(await h.db.memory.count({ where: { id: { in: ids }, topicId: { not: null } } })).toBe(0);
  });

  /**
   * A delete sent again while the sweep (or another delete) was finishing the branch ran its own batches
   * beside the other's: the two alternated batches of the same branch, each announcing its own. The
   * delete sent again now takes the branch over: the other stops at its next batch, having written
   * nothing more. Transactions run one at a time here, in the order they are asked for.
   */
  it("a delete sent again while the sweep finishes the branch takes it over: the sweep stops, no batch runs twice", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const t = await topic(ann, "Retried", team);
    const ids = [...(await filedMemories(ann, t.id, "retried a", team)), ...(await filedMemories(ann, t.id, "retried b", team))];
    // Other tests' marked branches are finished first, so the sweep takes this one.
    await finishOtherBranches();
    // Cut short long ago: marked, nothing since.
    await untouchedFor(SWEEP_GRACE_MS + 60_000, [t.id]);
    const filed = () => h.db.memory.count({ where: { id: { in: ids }, topicId: t.id } });
    const log: [string, number][] = [];
    let turn: Promise<void> = Promise.resolve();
    let request: Promise<unknown> | undefined;
    const inTurns = (who: string, onCall?: (call: number) => void) => {
      let calls = 0;
      return new Proxy(h.db, {
        get(target, key) {
          const real = Reflect.get(target, key) as unknown;
          if (key !== "$transaction" || typeof real !== "function") return real;
          return async (...args: unknown[]) => {
            onCall?.(++calls);
            const before = turn;
            let release!: () => void;
            turn = new Promise((resolve) => (release = resolve));
            await before;
            try {
              const left = await filed();
              const result = await (real as (...a: unknown[]) => Promise<unknown>).apply(target, args);
              log.push([who, left - (await filed())]);
              return result;
            } finally {
              release();
            }
          };
        },
      });
    };
    const requestDb = inTurns("request");
    // The delete is sent again once the sweep's first batch has committed.
    const sweepDb = inTurns("sweep", (call) => {
      if (call === 2) request = deleteTopic(sessionContext(h, ann, requestDb), t.id);
    });
    vi.stubEnv("ENGRAM_PURGE_BATCH", "2");
    try {
      const swept = await finishTopicDeletes(sweepDb);
      expect(await request).toEqual({ id: t.id, topic_id: t.id, deleted: true, deleted_count: 1 });
      // Taken over, the sweep did not finish it.
      expect(swept).toBe(0);
    } finally {
      vi.unstubAllEnvs();
    }
    const taken = log.findIndex(([who]) => who === "request");
    expect(taken).toBeGreaterThan(0);
    expect(log.slice(taken).filter(([who, unfiled]) => who === "sweep" && unfiled > 0)).toEqual([]);
    expect(await h.db.topic.count({ where: { id: t.id } })).toBe(0);
    expect(await h.db.memory.count({ where: { id: { in: ids }, topicId: { not: null } } })).toBe(0);
  });

  it("a delete sent again for a subtopic of a branch being deleted finishes the whole branch", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const a = await topic(ann, "Cut", team);
    const b = (await ann.post("/v1/topics", { name: "Short", parent_id: a.id })).body.data as { id: string };
    const ids = [...(await filedMemories(ann, a.id, "cut", team)), ...(await filedMemories(ann, b.id, "short", team))];
    await h.db.topic.updateMany({ where: { id: { in: [a.id, b.id] } }, data: { deletingAt: new Date() } });
    const res = await ann.delete(`/v1/topics/${b.id}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({ id: b.id, topic_id: b.id, deleted: true, deleted_count: 2 });
    expect(await h.db.topic.count({ where: { id: { in: [a.id, b.id] } } })).toBe(0);
    expect(await h.db.memory.count({ where: { id: { in: ids }, topicId: { not: null } } })).toBe(0);
  });

  it("a subtopic's delete that its parent's delete overtakes after the subtopic was checked finishes the whole branch", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const p = await topic(ann, "Parent", team);
    const s = (await ann.post("/v1/topics", { name: "Sub", parent_id: p.id })).body.data as { id: string };
    const ids = [...(await filedMemories(ann, p.id, "parent", team)), ...(await filedMemories(ann, s.id, "sub", team))];
    // The parent's delete marks the branch (its first batch) after the subtopic's delete read it, before its own first batch.
    const db = changedBefore(h.db, ["$transaction"], () => h.db.topic.updateMany({ where: { id: { in: [p.id, s.id] } }, data: { deletingAt: new Date() } }));
    const res = await deleteTopic(sessionContext(h, ann, db), s.id);
    expect(res).toEqual({ id: s.id, topic_id: s.id, deleted: true, deleted_count: 2 });
    expect(await h.db.topic.count({ where: { id: { in: [p.id, s.id] } } })).toBe(0);
    expect(await h.db.memory.count({ where: { id: { in: ids }, topicId: { not: null } } })).toBe(0);
  });

  it("a branch whose finishing fails goes behind the others: branches that always fail do not hold back newer ones", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const failing = await topic(ann, "Failing", team);
    const newer = await topic(ann, "Newer", team);
    // Marked branches of other tests would go first: finish them.
    await finishOtherBranches();
    await untouchedFor(3 * SWEEP_GRACE_MS, [failing.id]);
    await untouchedFor(2 * SWEEP_GRACE_MS, [newer.id]);
    const failingDb = new Proxy(h.db, {
      get: (target, key) => (key === "$transaction" ? () => Promise.reject(new Error("always fails")) : Reflect.get(target, key)),
    });
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      expect(await finishTopicDeletes(failingDb, 1)).toBe(0);
      expect(await h.db.topic.count({ where: { id: failing.id } })).toBe(1);
      // The next sweep takes the newer branch, not the one that just failed.
      expect(await finishTopicDeletes(h.db, 1)).toBe(1);
      expect(await h.db.topic.count({ where: { id: { in: [failing.id, newer.id] } } })).toBe(1);
      expect(await h.db.topic.count({ where: { id: failing.id } })).toBe(1);
    } finally {
      errors.mockRestore();
    }
    // Tried again once its own grace has passed.
    await untouchedFor(SWEEP_GRACE_MS + 60_000, [failing.id]);
    expect(await finishTopicDeletes(h.db, 1)).toBe(1);
    expect(await h.db.topic.count({ where: { id: failing.id } })).toBe(0);
  });

  /**
   * A delete cut short has told the streams what it unfiled, but without one event per batch: one per
   * 500 memories sent 100 for a topic of 50,000, each making every client refetch the tree. The first
   * batch (which hides the branch) and the last are announced, and between them at most one batch per
   * TOPIC_DELETE_EVENT_EVERY_MS.
   */
  it("announces the first and the last batch, and between them at most one batch every few seconds", async () => {
    const ann = await h.user("Ann");
    const t = await topic(ann, "Batched");
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await memory(ann, `batched ${i} ${Math.random()}`));
    expect((await ann.post("/v1/memories/batch-move", { ids, topic_id: t.id })).body.data.moved).toBe(7);
    const changes = () => h.db.event.count({ where: { type: "topic.changed", entityId: t.id } });
    const before = await changes();
    vi.stubEnv("ENGRAM_PURGE_BATCH", "2");
    const realNow = Date.now.bind(Date);
    let ahead = 0;
    const clock = vi.spyOn(Date, "now").mockImplementation(() => realNow() + ahead);
    const seen: number[] = [];
    let calls = 0;
    const db = new Proxy(h.db, {
      get(target, key) {
        const real = Reflect.get(target, key) as unknown;
        if (key !== "$transaction" || typeof real !== "function") return real;
        return async (...args: unknown[]) => {
          seen.push((await changes()) - before);
          const result = await (real as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          // The third batch of two comes long after the second.
          if (++calls === 2) ahead += TOPIC_DELETE_EVENT_EVERY_MS + 1000;
          return result;
        };
      },
    });
    try {
      expect(await deleteTopic(sessionContext(h, ann, db), t.id)).toMatchObject({ deleted_count: 1 });
    } finally {
      clock.mockRestore();
      vi.unstubAllEnvs();
    }
    // Before each batch: the first announced, the second right after it not, the third (late) again.
    expect(seen).toEqual([0, 1, 1, 2]);
    expect(await changes()).toBe(before + 3);
  });

  /**
   * A topic being deleted is gone to every request but the delete, so its name is free: the unique
   * sibling-name index still held it, and taking the name (create, rename, move, restore, reorder)
   * passed the check and failed on the index (409 duplicate_name without details.topic_id, or a
   * generic conflict for a reorder, on every retry until the delete finished).
   */
  it("a topic being deleted leaves its name free: create, rename, move, restore and reorder take it", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const hidden: Record<string, string> = {};
    for (const name of ["Projects", "Plans", "Moved", "Kept", "Ordered"]) hidden[name] = (await topic(ann, name, team)).id;
    await h.db.topic.updateMany({ where: { id: { in: Object.values(hidden) } }, data: { deletingAt: new Date() } });

    expect((await ann.post("/v1/topics", { name: "projects", hub_id: team })).status).toBe(201);
    const draft = await topic(ann, "Draft", team);
    const renamed = await ann.patch(`/v1/topics/${draft.id}`, { name: "Plans" });
    expect(renamed.status, renamed.text).toBe(200);
    const holder = await topic(ann, "Holder", team);
    const below = async (name: string, parent = holder.id) => (await ann.post("/v1/topics", { name, parent_id: parent })).body.data.id as string;
    const moved = await ann.patch(`/v1/topics/${await below("Moved")}`, { parent_id: null });
    expect(moved.status, moved.text).toBe(200);
    const ordered = await ann.post("/v1/topics/reorder", { operations: [{ topic_id: await below("Ordered"), position: 0, parent_id: null }] });
    expect(ordered.status, ordered.text).toBe(200);
    const shelf = await topic(ann, "Shelf", team);
    const kept = await below("Kept", shelf.id);
    expect((await ann.post(`/v1/topics/${shelf.id}/archive`)).status).toBe(200);
    // Its parent still archived, the restored topic comes back at the root, beside the hidden "Kept".
    const restored = await ann.post(`/v1/topics/${kept}/restore`);
    expect(restored.status, restored.text).toBe(200);
    const roots = (await ann.get(`/v1/topics?hub_id=${team}`)).body.data.topics.map((t: { name: string }) => t.name).sort();
    expect(roots).toEqual(["Holder", "Kept", "Moved", "Ordered", "Plans", "projects"]);
    // Visible topics still clash among themselves, and the index still says so.
    const twice = await ann.post("/v1/topics", { name: "PLANS", hub_id: team });
    expect(twice.status).toBe(409);
    expect(twice.body.error.details.topic_id).toBe(draft.id);
    await expect(h.db.topic.create({ data: { id: newId(), hubId: team, name: "plans" } })).rejects.toThrow();
  });

  /**
   * A topic being deleted is gone from the tree and 404 to a get, yet the hub's counts (its detail and
   * summary) still counted it until the delete finished. It still counts toward the 500 of the hub,
   * whose rows it holds until then (documented in docs/topics.md).
   */
  it("a topic being deleted is left out of the hub's counts, and still counts toward the hub's limit until it is gone", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const kept = await topic(ann, "Kept", team);
    const going = await topic(ann, "Going", team);
    await ann.post(`/v1/topics/${(await topic(ann, "Shelved", team)).id}/archive`);
    await h.db.topic.update({ where: { id: going.id }, data: { deletingAt: new Date() } });
    expect((await ann.get(`/v1/hubs/${team}`)).body.data.counts.topics).toBe(2);
    const summary = (await ann.get(`/v1/hubs/${team}/summary`)).body.data;
    expect([summary.counts.topics, summary.stats.topics]).toEqual([2, 2]);
    expect((await ann.get(`/v1/topics/${kept.id}`)).status).toBe(200);

    const now = new Date();
    await h.db.topic.createMany({
      data: Array.from({ length: MAX_TOPICS_PER_HUB - 3 }, (_, i) => ({ id: newId(), hubId: team, name: `t${i}`, createdAt: now, updatedAt: now })),
    });
    const over = await ann.post("/v1/topics", { name: "One too many", hub_id: team });
    expect(over.status).toBe(409);
    expect(over.body.error.details).toEqual({ limit: MAX_TOPICS_PER_HUB });
  });

  /**
   * A topic being deleted is 404 to every request, yet the memories its delete had not yet taken out
   * still showed its id as topic_id (and recall its name), and topic_id= found them: a client following
   * that id got 404, a dangling reference. They now show no topic, as they will once their batch runs.
   */
  it("memories still filed under a topic being deleted show no topic, and a filter on it finds nothing", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const going = await topic(ann, "Vanishing", team);
    const kept = await topic(ann, "Staying", team);
    const word = `zebrafinch${Math.random().toString(36).slice(2, 8)}`;
    const hiddenIds = await filedMemories(ann, going.id, word, team);
    const keptIds = await filedMemories(ann, kept.id, word, team);
    const [hiddenId, keptId] = [hiddenIds[0], keptIds[0]];
    await h.db.$executeRaw`UPDATE topics SET deleting_at = now() WHERE id = ${going.id}::uuid`;

    const listed = (await ann.get(`/v1/memories?hub_id=${team}&limit=100`)).body.data.memories as { id: string; topic_id: string | null }[];
    const topicOf = new Map(listed.map((m) => [m.id, m.topic_id]));
    expect([topicOf.get(hiddenId!), topicOf.get(keptId!)]).toEqual([null, kept.id]);
    // Across several hubs (one statement walking each hub) too.
    await memory(ann, "elsewhere");
    const everywhere = (await ann.get(`/v1/memories?limit=100`)).body.data.memories as { id: string; topic_id: string | null }[];
    expect(everywhere.find((m) => m.id === hiddenId)?.topic_id).toBeNull();
    expect((await ann.get(`/v1/memories/${hiddenId}`)).body.data.topic_id).toBeNull();
    expect((await ann.get(`/v1/memories/${keptId}`)).body.data.topic_id).toBe(kept.id);
    const filtered = await ann.get(`/v1/memories?hub_id=${team}&topic_id=${going.id}`);
    expect(filtered.status, filtered.text).toBe(200);
    expect([filtered.body.data.memories, filtered.body.data.total]).toEqual([[], 0]);

    const searched = (await ann.get(`/v1/memories/search?q=${word}&hub_id=${team}&limit=50`)).body.data as { memory_id: string; topic_id?: string; topic_name?: string }[];
    const hit = searched.find((r) => r.memory_id === hiddenId);
    expect(hit).toBeDefined();
    expect([hit!.topic_id, hit!.topic_name]).toEqual([undefined, undefined]);
    expect(searched.find((r) => r.memory_id === keptId)).toMatchObject({ topic_id: kept.id, topic_name: "Staying" });
    expect((await ann.get(`/v1/memories/search?q=${word}&hub_id=${team}&topic_id=${going.id}`)).body.data).toEqual([]);

    // Recall (and ask, which recalls) filtered on it finds nothing either.
    await indexMemories(h.db, [...hiddenIds, ...keptIds]);
    const recall = async (topicId: string) => (await ann.post("/v1/recall", { query: word, topic_id: topicId })).body.data.memories.map((m: { id: string }) => m.id) as string[];
    const inKept = await recall(kept.id);
    expect(inKept.length).toBeGreaterThan(0);
    expect(inKept.every((id) => keptIds.includes(id))).toBe(true);
    expect(await recall(going.id)).toEqual([]);
    // Shown in no topic, they are counted as such: with the hub's memories without a topic.
    expect((await ann.get(`/v1/topics?hub_id=${team}`)).body.data.unassigned_count).toBe(5);
    expect((await ann.get(`/v1/hubs/${team}/summary`)).body.data.stats.inbox).toBe(5);
    const recalled = await loadRecalled(h.database.sql, [hiddenId!, keptId!].map((id) => ({ memoryId: id, chunkId: null, score: 0.9 })), { now: new Date(), withHub: false, userId: ann.id, hubIds: [team] });
    expect(recalled.map((r) => [r.topic_id, r.topic_name])).toEqual([[undefined, undefined], [kept.id, "Staying"]]);
  });

  /**
   * The hidden topic's id still came back where a memory is answered outside the list and GET reads:
   * an edit's answer ("the full memory, as GET answers it"), related memories, a push answered with
   * the memory of the same content, and the paged read of MCP's engram_get and fetch.
   */
  it("a memory under a topic being deleted shows no topic in every answer that holds it", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const going = await topic(ann, "Fading", team);
    const word = `quokka${Math.random().toString(36).slice(2, 8)}`;
    const ids = await filedMemories(ann, going.id, word, team);
    const hiddenId = ids[0]!;
    const content = (await ann.get(`/v1/memories/${hiddenId}`)).body.data.content as string;
    await h.db.$executeRaw`UPDATE topics SET deleting_at = now() WHERE id = ${going.id}::uuid`;

    const patched = await ann.patch(`/v1/memories/${hiddenId}`, { tags: ["edited"] });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data.topic_id).toBeNull();
    const pushed = await ann.post("/v1/memories", { content }, { headers: { "x-hub-id": team } });
    expect(pushed.body.data.id).toBe(hiddenId);
    expect(pushed.body.data.topic_id).toBeNull();
    const paged = await getMemoryPage(sessionContext(h, ann), hiddenId, { offset: 0, chars: 100 });
    expect(paged.memory.topic_id).toBeNull();
    await indexMemories(h.db, ids);
    const related = await ann.get(`/v1/memories/${hiddenId}/related`);
    expect(related.status, related.text).toBe(200);
    const neighbours = related.body.data as { memory: { id: string; topic_id: string | null } }[];
    expect(neighbours.length).toBeGreaterThan(0);
    expect(neighbours.map((entry) => entry.memory.topic_id)).toEqual(neighbours.map(() => null));
  });

  /**
   * Recall on a topic being deleted answered filters.hub_ids [] where a missing topic reports the hubs
   * searched, and only on such a topic did it skip its search: of another hub's topic, the answer told
   * (and its speed) that the topic existed and was being deleted.
   */
  it("recall on a topic being deleted answers as on a missing topic, and another hub's such topic tells nothing", async () => {
    const ann = await h.user("Ann");
    const bob = await h.user("Bob");
    const team = await h.teamHub(ann);
    const going = await topic(ann, "Going", team);
    const foreign = await topic(bob, "Elsewhere");
    await filedMemories(ann, going.id, "otter", team);
    await h.db.$executeRaw`UPDATE topics SET deleting_at = now() WHERE id = ANY(${[going.id, foreign.id]}::uuid[])`;
    const recall = async (topicId: string, noRerank = false) => {
      const res = await ann.post("/v1/recall", { query: "otter notes", topic_id: topicId, hub_ids: [team], ...(noRerank && { no_rerank: true }) });
      expect(res.status, res.text).toBe(200);
      const { filters, rerank_reason } = res.body.data.query_metadata as { filters: { hub_ids: string[]; topic_id: string }; rerank_reason: string };
      return { ...filters, rerank_reason };
    };
    const missing = await recall(newId());
    expect(missing.hub_ids).toEqual([team]);
    expect((await recall(going.id)).hub_ids).toEqual(missing.hub_ids);
    expect((await recall(foreign.id)).hub_ids).toEqual(missing.hub_ids);
    // A recall that turned the reranker off says so, on a missing topic and on one being deleted alike.
    expect((await recall(going.id, true)).rerank_reason).toBe((await recall(newId(), true)).rerank_reason);
    expect(await topicBeingDeletedFor(h.database.sql, ann.id, undefined, foreign.id)).toBe(false);
    expect(await topicBeingDeletedFor(h.database.sql, ann.id, undefined, going.id)).toBe(true);
  });

  it("a topic's memories listed as its delete begins, after the topic was checked, are none, as on a topic_id= filter", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const going = await topic(ann, "Overtaken", team);
    await filedMemories(ann, going.id, "overtaken", team);
    const db = changedBefore(h.db, ["memory.findMany"], () => h.db.topic.updateMany({ where: { id: going.id }, data: { deletingAt: new Date() } }));
    const listed = await listTopicMemories(sessionContext(h, ann, db), going.id, {});
    expect(listed.memories).toEqual([]);
  });

  it("answers 405 for methods the routes do not implement", async () => {
    const ann = await h.user("Ann");
    expect((await ann.put("/v1/topics", {})).status).toBe(405);
    expect((await ann.post(`/v1/topics/${newId()}`, {})).status).toBe(405);
    expect((await ann.get(`/v1/topics/${newId()}/archive`)).status).toBe(405);
  });
});

/**
 * A topic's memories leave it a bounded batch per transaction: unfiled in one transaction, a topic
 * of 50,000 memories outlasted the transaction timeout (503 after 120 s on a loaded PostgreSQL) and
 * was rolled back on every attempt, so it could never be deleted. Needs a real server (PGlite serves
 * one session, which the row held below would stop); skipped by `npm test`.
 */
/**
 * GET /v1/topics and the hub summary read the topics, the ids being deleted and the counters in separate
 * statements: a delete's first batch committing in between (it marks the branch and unfiles a batch)
 * counted the topic's memories twice or not at all. Here the batch is held uncommitted with the
 * counters locked, so the reads started meanwhile wait on the counters until it commits. Needs a real
 * server (the held transaction); skipped by `npm test`.
 */
describe.skipIf(!testPostgres())("counts beside a delete's first batch", () => {
  it("count a topic's memories once, as of one moment", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const going = await topic(ann, "Leaving", team);
    const filed = await filedMemories(ann, going.id, "filed", team);
    await memory(ann, "unfiled one", team);
    await memory(ann, "unfiled two", team);
    const blocker = new pg.Client({ connectionString: h.url! });
    await blocker.connect();
    const waiting = async (n: number) => {
      for (let waited = 0; ; waited += 20) {
        const { rows } = await blocker.query("SELECT count(DISTINCT l.pid)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        if (rows[0].n >= n) return;
        if (waited > 20_000) throw new Error("the reads never waited for the batch");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    try {
      // As a delete's first batch of one memory does (lib/topics/delete-topic.ts), held uncommitted.
      await blocker.query("BEGIN");
      await blocker.query("LOCK TABLE storage_usage IN ACCESS EXCLUSIVE MODE");
      await blocker.query("UPDATE topics SET deleting_at = now() WHERE id = $1::uuid", [going.id]);
      await blocker.query("UPDATE memories SET topic_id = NULL WHERE id = $1::uuid", [filed[0]]);
      const summary = ann.get(`/v1/hubs/${team}/summary`);
      await waiting(1);
      const listed = ann.get(`/v1/topics?hub_id=${team}`);
      await waiting(2);
      await blocker.query("COMMIT");
      const [s, l] = await Promise.all([summary, listed]);
      expect(s.status, s.text).toBe(200);
      expect(l.status, l.text).toBe(200);
      // Two unfiled, one unfiled by the batch, four still under the hidden topic: all seven show no topic.
      expect(s.body.data.stats.inbox).toBe(7);
      expect([l.body.data.topics.map((t: { id: string }) => t.id), l.body.data.unassigned_count]).toEqual([[], 7]);
    } finally {
      await blocker.query("ROLLBACK").catch(() => {});
      await blocker.end();
    }
  });
});

describe.skipIf(!testPostgres())("delete of a topic with many memories", () => {
  it("unfiles them in batches of ENGRAM_PURGE_BATCH, each committed before the next, then deletes the topic", async () => {
    const ann = await h.user("Ann");
    const t = await topic(ann, "Many");
    const ids = await filedMemories(ann, t.id, "filed");
    const last = [...ids].sort().at(-1)!;
    vi.stubEnv("ENGRAM_PURGE_BATCH", "2");
    const blocker = new pg.Client({ connectionString: h.url! });
    await blocker.connect();
    try {
      // The memory the delete reaches last is held: what the delete did before it must be committed already.
      await blocker.query("BEGIN");
      await blocker.query("SELECT 1 FROM memories WHERE id = $1::uuid FOR UPDATE", [last]);
      const deleting = ann.delete(`/v1/topics/${t.id}`);
      for (let waited = 0; ; waited += 20) {
        const { rows } = await blocker.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        if (rows[0].n > 0) break;
        if (waited > 20_000) throw new Error("the delete never waited for the held memory");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const filed = async () =>
        (await h.db.memory.count({ where: { id: { in: ids }, topicId: t.id } }));
      // Four memories sort before the held one: two batches of two, the first committed.
      expect(await filed()).toBeLessThan(5);
      await blocker.query("ROLLBACK");
      const res = await deleting;
      expect(res.status, res.text).toBe(200);
      expect(res.body.data).toMatchObject({ id: t.id, deleted: true, deleted_count: 1 });
      expect(await filed()).toBe(0);
      expect(await h.db.topic.count({ where: { id: t.id } })).toBe(0);
      // The counters follow the rows: the hub's inbox holds all five again.
      expect((await ann.get("/v1/topics")).body.data.unassigned_count).toBe(5);
    } finally {
      vi.unstubAllEnvs();
      await blocker.query("ROLLBACK").catch(() => {});
      await blocker.end();
    }
  });

  /**
   * Every instance sweeps at start: two sweeps reading the same stale branch each finished it, batches
   * alternating, each announced twice. The first to stamp it takes it; the other leaves it.
   */
  it("two sweeps at once finish a branch once: the one that claims it first", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const t = await topic(ann, "Stale", team);
    const ids = await filedMemories(ann, t.id, "stale", team);
    // Other tests' marked branches are finished first, so both sweeps read this one only.
    await finishOtherBranches();
    await untouchedFor(SWEEP_GRACE_MS + 60_000, [t.id]);
    const changes = () => h.db.event.count({ where: { type: "topic.changed", entityId: t.id } });
    const before = await changes();
    vi.stubEnv("ENGRAM_PURGE_BATCH", "2");
    try {
      const finished = await Promise.all([finishTopicDeletes(h.db), finishTopicDeletes(h.db)]);
      expect(finished.reduce((a, b) => a + b, 0)).toBe(1);
    } finally {
      vi.unstubAllEnvs();
    }
    expect(await h.db.topic.count({ where: { id: t.id } })).toBe(0);
    expect(await h.db.memory.count({ where: { id: { in: ids }, topicId: { not: null } } })).toBe(0);
    // The first batch and the last, by the one sweep.
    expect(await changes()).toBe(before + 2);
  });

  /**
   * A delete sent again while the sweep was finishing the branch ran its batches beside the sweep's, the
   * two taking the topic lock in turns: whichever ran the last batch answered for it, so the request
   * could answer deleted_count 0. The request now takes the branch over and the sweep stops.
   */
  it("a delete sent again while the sweep waits for the topic lock takes the branch over: the sweep stops, the request finishes it", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const t = await topic(ann, "Resent", team);
    const ids = [...(await filedMemories(ann, t.id, "resent a", team)), ...(await filedMemories(ann, t.id, "resent b", team))];
    await finishOtherBranches();
    await untouchedFor(SWEEP_GRACE_MS + 60_000, [t.id]);
    const changes = () => h.db.event.count({ where: { type: "topic.changed", entityId: t.id } });
    const before = await changes();
    vi.stubEnv("ENGRAM_PURGE_BATCH", "2");
    const blocker = new pg.Client({ connectionString: h.url! });
    await blocker.connect();
    const waitingForTopicLock = async (n: number, what: string) => {
      for (let waited = 0; ; waited += 20) {
        const { rows } = await blocker.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'");
        if (rows[0].n >= n) return;
        if (waited > 20_000) throw new Error(what);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    try {
      // The hub's topic lock held: the sweep (its branch claimed) and then the request queue for it.
      await blocker.query("BEGIN");
      await blocker.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [topicsLockKey(team)]);
      const sweeping = finishTopicDeletes(h.db);
      await waitingForTopicLock(1, "the sweep never waited for the topic lock");
      const deleting = ann.delete(`/v1/topics/${t.id}`);
      await waitingForTopicLock(2, "the delete never waited for the topic lock");
      await blocker.query("ROLLBACK");
      const [swept, deleted] = await Promise.all([sweeping, deleting]);
      expect(deleted.status, deleted.text).toBe(200);
      expect(deleted.body.data).toEqual({ id: t.id, topic_id: t.id, deleted: true, deleted_count: 1 });
      expect(swept).toBe(0);
    } finally {
      vi.unstubAllEnvs();
      await blocker.query("ROLLBACK").catch(() => {});
      await blocker.end();
    }
    expect(await h.db.topic.count({ where: { id: t.id } })).toBe(0);
    expect(await h.db.memory.count({ where: { id: { in: ids }, topicId: { not: null } } })).toBe(0);
    // At most the sweep's first batch, then the request's first and its last: none twice.
    expect(await changes()).toBeLessThanOrEqual(before + 3);
  });

  it("a subtopic moved out while a batch waits is refused: the move, queued for the topic lock, no longer lands between two batches", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const a = await topic(ann, "Parent", team);
    const b = (await ann.post("/v1/topics", { name: "Child", parent_id: a.id })).body.data as { id: string };
    const ids = await filedMemories(ann, b.id, "child", team);
    const last = [...ids].sort().at(-1)!;
    vi.stubEnv("ENGRAM_PURGE_BATCH", "2");
    const blocker = new pg.Client({ connectionString: h.url! });
    await blocker.connect();
    const waiting = async () =>
      (await blocker.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).rows[0].n as number;
    try {
      await blocker.query("BEGIN");
      await blocker.query("SELECT 1 FROM memories WHERE id = $1::uuid FOR UPDATE", [last]);
      const deleting = ann.delete(`/v1/topics/${a.id}`);
      for (let waited = 0; (await waiting()) === 0; waited += 20) {
        if (waited > 20_000) throw new Error("the delete never waited for the held memory");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // The second batch waits for the held memory, holding the hub's topic lock: the move queues for
      // that lock ahead of the third batch, unless it is refused at once.
      let settled = false;
      const moving = ann.patch(`/v1/topics/${b.id}`, { parent_id: null }).then((res) => ((settled = true), res));
      for (let waited = 0; !settled && (await waiting()) < 2; waited += 20) {
        if (waited > 20_000) throw new Error("the move neither answered nor waited for the topic lock");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await blocker.query("ROLLBACK");
      const [deleted, moved] = await Promise.all([deleting, moving]);
      expect(deleted.status, deleted.text).toBe(200);
      expect(moved.status, moved.text).toBe(404);
      expect(await h.db.topic.count({ where: { id: { in: [a.id, b.id] } } })).toBe(0);
      expect(await h.db.memory.count({ where: { id: { in: ids }, topicId: { not: null } } })).toBe(0);
    } finally {
      vi.unstubAllEnvs();
      await blocker.query("ROLLBACK").catch(() => {});
      await blocker.end();
    }
  });
});
