import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "@/lib/ids.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Undoing a dream's filing into a topic the dream created, once a member has made that topic theirs.

let h: Harness;
let owner: Client;
beforeAll(async () => {
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  await h?.close();
});

/** A hub with one memory filed by a (completed) dream run into the topic that run created. */
async function filedByDream() {
  const hubId = await h.teamHub(owner);
  const memoryId = (await owner.post("/v1/memories", { content: "Kubernetes pods are autoscaled on CPU." }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
  const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
  const made = new Date(Date.now() - 60_000);
  const topic = await h.db.topic.create({ data: { id: newId(), hubId, name: "Kubernetes", createdBy: null, createdAt: made, updatedAt: made } });
  await h.db.memory.update({ where: { id: memoryId }, data: { topicId: topic.id } });
  const action = await h.db.dreamAction.create({
    data: { id: newId(), runId: run.id, hubId, actionType: "organize", state: "applied", sourceMemoryIds: [memoryId], resultMemoryId: memoryId, toTopicId: topic.id, createdTopic: true, reason: "grouped" },
  });
  return { hubId, memoryId, topicId: topic.id, actionId: action.id };
}

describe("undoing the filing that empties a dream's topic a member has since touched", () => {
  /**
   * The undo deleted the dream's topic once empty whatever a member had done with it since: a topic
   * renamed, described, pinned or moved under another was theirs, and went with the dream's filing.
   */
  it.each([
    ["renamed", { name: "Cluster ops" }],
    ["described", { description: "How we run the cluster." }],
    ["pinned", { pinned: true }],
    ["given an icon", { icon: "⎈" }],
  ])("keeps a topic a member %s, and takes the memory out of it", async (_what, change) => {
    const { memoryId, topicId, actionId } = await filedByDream();
    const patched = await owner.patch(`/v1/topics/${topicId}`, change);
    expect(patched.status, patched.text).toBe(200);
    const undone = await owner.post(`/v1/dreams/actions/${actionId}/undo`);
    expect(undone.status, undone.text).toBe(200);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: memoryId } })).topicId).toBeNull();
    expect(await h.db.topic.findUnique({ where: { id: topicId } })).not.toBeNull();
  });

  it("keeps a topic a member moved under another", async () => {
    const { hubId, memoryId, topicId, actionId } = await filedByDream();
    const parent = await owner.post("/v1/topics", { name: "Infrastructure", hub_id: hubId });
    expect(parent.status, parent.text).toBe(201);
    const moved = await owner.patch(`/v1/topics/${topicId}`, { parent_id: parent.body.data.id });
    expect(moved.status, moved.text).toBe(200);
    const undone = await owner.post(`/v1/dreams/actions/${actionId}/undo`);
    expect(undone.status, undone.text).toBe(200);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: memoryId } })).topicId).toBeNull();
    expect((await h.db.topic.findUniqueOrThrow({ where: { id: topicId } })).parentId).toBe(parent.body.data.id);
  });

  it("still removes a topic no member touched once empty", async () => {
    const { topicId, actionId } = await filedByDream();
    const undone = await owner.post(`/v1/dreams/actions/${actionId}/undo`);
    expect(undone.status, undone.text).toBe(200);
    expect(await h.db.topic.findUnique({ where: { id: topicId } })).toBeNull();
  });
});

/**
 * A topic being deleted is its delete's: the undo deleted the dream's topic it emptied though its delete
 * was under way (which then found nothing left and answered deleted_count 0, or 404 when sent again), and
 * filed a memory back into a topic whose delete was taking its memories out.
 */
describe("undoing a dream's filing beside a topic being deleted", () => {
  it("leaves a dream's topic being deleted to its delete", async () => {
    const { memoryId, topicId, actionId } = await filedByDream();
    // As a delete's first batch marks it: updated_at untouched, so the topic is still as the dream made it.
    await h.db.$executeRaw`UPDATE topics SET deleting_at = now() WHERE id = ${topicId}::uuid`;
    const undone = await owner.post(`/v1/dreams/actions/${actionId}/undo`);
    expect(undone.status, undone.text).toBe(200);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: memoryId } })).topicId).toBeNull();
    expect(await h.db.topic.findUnique({ where: { id: topicId } })).not.toBeNull();
    const deleted = await owner.delete(`/v1/topics/${topicId}`);
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body.data.deleted_count).toBe(1);
  });

  it("puts the memory in the inbox rather than back into a topic being deleted, or gone", async () => {
    for (const gone of [false, true]) {
      const { hubId, memoryId, actionId } = await filedByDream();
      const from = await h.db.topic.create({ data: { id: newId(), hubId, name: `Before ${gone}`, deletingAt: new Date() } });
      await h.db.dreamAction.update({ where: { id: actionId }, data: { fromTopicId: from.id } });
      if (gone) await h.db.topic.delete({ where: { id: from.id } });
      const undone = await owner.post(`/v1/dreams/actions/${actionId}/undo`);
      expect(undone.status, undone.text).toBe(200);
      expect((await h.db.memory.findUniqueOrThrow({ where: { id: memoryId } })).topicId).toBeNull();
    }
  });
});
