import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { dueHubs, runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { claimDreamRun, executeDreamRun, LostLeaseError, runDreamPhase } from "@/lib/dreams/run-dream.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { newId } from "@/lib/ids.ts";
import { MAX_POSITION, MAX_TOPICS_PER_HUB } from "@/lib/topics/topic-fields.ts";
import { indexMemories } from "./recall-helpers.ts";
import { backdateMemories } from "./support/backdate-memories.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { resolveDreamAction } from "@/lib/dreams/undo-dream-action.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";
import pg from "pg";

// What a member decided about a memory or a topic after a dream acted wins over the next run, and an
// undo acts only on what the dream itself left.

const DAY = 86_400_000;

let h: Harness;
let owner: Client;
beforeAll(async () => {
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  await h?.close();
});

async function dream(hubId: string): Promise<string> {
  const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
  expect(run.status).toBe("queued");
  expect(await runDreamRunOnce(h.db, run.run_id)).toBe(true);
  return run.run_id;
}

/** A memory never read and unchanged for 200 days: the next run archives it as stale. */
async function staleMemory(hubId: string, content: string): Promise<string> {
  const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
  expect(res.status, res.text).toBe(201);
  const longAgo = new Date(Date.now() - 200 * DAY);
  await backdateMemories(h.db, res.body.data.id, { createdAt: longAgo, updatedAt: longAgo });
  return res.body.data.id;
}

/** Two notes written ten days ago a minute apart (the first the older), indexed: a pair for the next run. */
async function pairOfNotes(hubId: string, contents: [string, string]): Promise<string[]> {
  const ids: string[] = [];
  for (const [i, content] of contents.entries()) {
    const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    ids.push(res.body.data.id);
    const at = new Date(Date.now() - 10 * DAY + i * 60_000);
    await backdateMemories(h.db, res.body.data.id, { createdAt: at, updatedAt: at });
  }
  await indexMemories(h.db, ids);
  return ids;
}

/** Two notes that contradict each other in `hubId`, and the review a dream run flagged for them. */
async function flaggedReview(hubId: string) {
  await pairOfNotes(hubId, ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."]);
  const runId = await dream(hubId);
  return h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "contradiction" } });
}

const state = async (id: string) => (await h.db.memory.findUniqueOrThrow({ where: { id } })).state;

describe("a stale memory a member restored by hand", () => {
  /**
   * Since staleness goes by content_changed_at, a restore through PATCH {state: "active"} (not the
   * undo endpoint, and without reading the memory) left it as stale as before, and the very next run
   * archived it again: the member's decision lost to the dream's.
   */
  it("is not archived as stale again by a later run", async () => {
    const hubId = await h.teamHub(owner);
    const id = await staleMemory(hubId, "Temporary note: the office wifi password changes next week.");
    const first = await dream(hubId);
    expect(await state(id)).toBe("archived");
    expect(await h.db.dreamAction.count({ where: { runId: first, actionType: "archive", sourceMemoryIds: { has: id } } })).toBe(1);
    const restored = await owner.patch(`/v1/memories/${id}`, { state: "active" });
    expect(restored.status, restored.text).toBe(200);
    const second = await dream(hubId);
    expect(await state(id)).toBe("active");
    expect(await h.db.dreamAction.count({ where: { runId: second, actionType: "archive" } })).toBe(0);
  }, 120_000);
});

describe("a merged memory a member restored by hand", () => {
  /**
   * A run skipped only pairs whose merge was undone through the undo endpoint: the archived side of a
   * merge restored with PATCH {state: "active"} was merged into the same memory again by the next run.
   */
  it("is not merged into the same memory again by a later run", async () => {
    const hubId = await h.teamHub(owner);
    const ids = await pairOfNotes(hubId, ["Use pnpm, not npm, for installing dependencies in the web repo.", "In the web repo we install dependencies with pnpm instead of npm."]);
    const [older, newer] = [ids[0]!, ids[1]!];
    const first = await dream(hubId);
    expect(await h.db.dreamAction.count({ where: { runId: first, actionType: "merge" } })).toBe(1);
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: older } })).toMatchObject({ state: "archived", supersededBy: newer });
    const restored = await owner.patch(`/v1/memories/${older}`, { state: "active" });
    expect(restored.status, restored.text).toBe(200);
    // Active again, it is superseded by nothing (as the undo and a new push leave it): the restore kept
    // the merge's superseded_by, and an active memory still named the one it was merged into.
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: older } })).toMatchObject({ state: "active", supersededBy: null });
    const second = await dream(hubId);
    expect(await h.db.dreamAction.count({ where: { runId: second, actionType: "merge" } })).toBe(0);
    expect(await state(older)).toBe("active");

    // Archived again by hand: an undo of the old merge splits nothing (the member's archive is theirs).
    expect((await owner.patch(`/v1/memories/${older}`, { state: "archived" })).status).toBe(200);
    const merge = await h.db.dreamAction.findFirstOrThrow({ where: { runId: first, actionType: "merge" } });
    const undo = await owner.post(`/v1/dreams/actions/${merge.id}/undo`);
    expect(undo.status, undo.text).toBe(409);
    expect(await state(older)).toBe("archived");
  }, 120_000);
});

describe("undoing a stale archive", () => {
  /**
   * The undo restored the memory whenever it was archived, for whatever reason: a member who restored
   * it by hand and later archived it again themselves had that archive undone by an old dream action.
   */
  it("restores nothing a member archived again by hand after restoring it; a fresh archive still undoes", async () => {
    const hubId = await h.teamHub(owner);
    const reArchived = await staleMemory(hubId, "Reminder to renew the conference booth reservation before the deadline.");
    const untouched = await staleMemory(hubId, "The parking garage closes at nine in the evening on Fridays.");
    const runId = await dream(hubId);
    const action = async (id: string) => h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "archive", sourceMemoryIds: { has: id } } });
    const stale = await action(reArchived);
    expect((await owner.patch(`/v1/memories/${reArchived}`, { state: "active" })).status).toBe(200);
    expect((await owner.patch(`/v1/memories/${reArchived}`, { state: "archived" })).status).toBe(200);
    const undo = await owner.post(`/v1/dreams/actions/${stale.id}/undo`);
    expect(undo.status, undo.text).toBe(409);
    expect(undo.body.error.code).toBe("conflict");
    expect(await state(reArchived)).toBe("archived");
    expect((await h.db.dreamAction.findUniqueOrThrow({ where: { id: stale.id } })).state).toBe("applied");

    // Read since (reads do not write the memory): still the dream's archive, and undone.
    expect((await owner.post(`/v1/memories/${untouched}/access`)).status).toBeLessThan(300);
    const fresh = await owner.post(`/v1/dreams/actions/${(await action(untouched)).id}/undo`);
    expect(fresh.status, fresh.text).toBe(200);
    expect(await state(untouched)).toBe("active");
  }, 120_000);

  /**
   * Actions written before the archive's updated_at was recorded: the trigger can have moved the
   * archive's updated_at past the action's own time (a stored value not behind the writer's clock),
   * and comparing with the action's time refused their undo for good though nobody touched them.
   */
  it("still undoes an action from before the archive's updated_at was recorded, whose archive wrote past its time", async () => {
    const hubId = await h.teamHub(owner);
    const id = await staleMemory(hubId, "The old build server's disk is replaced every spring.");
    const runId = await dream(hubId);
    const stale = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "archive", sourceMemoryIds: { has: id } } });
    const { archived_updated_at: _recorded, ...older } = stale.details as Record<string, unknown>;
    const archivedUpdatedAt = (await h.db.memory.findUniqueOrThrow({ where: { id } })).updatedAt;
    await h.db.dreamAction.update({ where: { id: stale.id }, data: { details: older as object, createdAt: new Date(archivedUpdatedAt.getTime() - 5) } });
    const undo = await owner.post(`/v1/dreams/actions/${stale.id}/undo`);
    expect(undo.status, undo.text).toBe(200);
    expect(await state(id)).toBe("active");
  }, 120_000);
});

describe("a topic a dream creates", () => {
  /**
   * It was written with the schema's default position 0, so it sorted first among the hub's top-level
   * topics instead of last, where a topic created through the API goes.
   */
  it("goes after its siblings, as one created through the API does, within the positions a client may send", async () => {
    const hubId = await h.teamHub(owner);
    for (const name of ["Office", "Travel"]) {
      const res = await owner.post("/v1/topics", { name, hub_id: hubId });
      expect(res.status, res.text).toBe(201);
    }
    const ids: string[] = [];
    for (const content of [
      "Kubernetes pods in the cluster are autoscaled with the horizontal pod autoscaler on CPU.",
      "Each Kubernetes deployment sets pod resource requests and limits for CPU and memory.",
      "Kubernetes pod logs are shipped from the cluster to Loki by a DaemonSet.",
      "Restart a stuck Kubernetes pod with kubectl rollout restart on its deployment.",
    ]) {
      const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
    }
    await indexMemories(h.db, ids);
    const runId = await dream(hubId);
    const created = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "organize", createdTopic: true } });
    const topics = await h.db.topic.findMany({ where: { hubId, parentId: null }, orderBy: [{ position: "asc" }, { name: "asc" }] });
    expect(topics.map((t) => t.id).at(-1)).toBe(created.toTopicId);
    expect(topics.find((t) => t.id === created.toTopicId)!.position).toBe(2);

    // Past the largest position a client may send, it ties with the last there.
    await h.db.topic.deleteMany({ where: { hubId } });
    expect((await owner.post("/v1/topics", { name: "Office", hub_id: hubId, position: MAX_POSITION })).status).toBe(201);
    await h.db.memory.updateMany({ where: { id: { in: ids } }, data: { topicId: null } });
    const next = await dream(hubId);
    const again = await h.db.dreamAction.findFirstOrThrow({ where: { runId: next, actionType: "organize", createdTopic: true } });
    expect((await h.db.topic.findUniqueOrThrow({ where: { id: again.toTopicId! } })).position).toBe(MAX_POSITION);
  }, 180_000);
});

describe("GET /v1/dreams?hub_id", () => {
  /** hub_id had no length bound (GET /v1/usage/dreams caps it at 200): any size went on to the hub lookup. */
  it("is at most 200 characters, as on GET /v1/usage/dreams", async () => {
    const long = await owner.get(`/v1/dreams?hub_id=${"x".repeat(201)}`);
    expect(long.status, long.text).toBe(400);
    expect(long.body.error.code).toBe("invalid_request");
    expect((await owner.get(`/v1/usage/dreams?hub_id=${"x".repeat(201)}`)).status).toBe(400);
    expect((await owner.get(`/v1/dreams?hub_id=${"x".repeat(200)}`)).status).toBe(404);
  });
});

describe("what an undo or a decision tells the event stream", () => {
  /**
   * Undoing an archive, a merge or a filing, and deciding a review, changed memories' state or topic
   * (and updated_at) with no memory.updated event: a client syncing by the stream never heard of the
   * memory coming back, leaving its topic or being archived, as it does for the same change made
   * through PATCH or a topic's endpoints.
   */
  it("each memory an undo or a resolve changes gets a memory.updated, by the member", async () => {
    const hubId = await h.teamHub(owner);
    const post = async (content: string, ageDays: number) => {
      const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      const at = new Date(Date.now() - ageDays * DAY + Math.random() * 60_000);
      await backdateMemories(h.db, res.body.data.id, { createdAt: at, updatedAt: at });
      return res.body.data.id as string;
    };
    const stale = await post("Temporary note: the office wifi password changes next week.", 200);
    const dupOld = await post("Use pnpm, not npm, for installing dependencies in the web repo.", 11);
    const dupNew = await post("In the web repo we install dependencies with pnpm instead of npm.", 10);
    const contraOld = await post("The API request timeout is 30 seconds.", 9);
    const contraNew = await post("The API request timeout is 60 seconds.", 8);
    const k8s = [];
    for (const content of [
      "Kubernetes pods in the cluster are autoscaled with the horizontal pod autoscaler on CPU.",
      "Each Kubernetes deployment sets pod resource requests and limits for CPU and memory.",
      "Kubernetes pod logs are shipped from the cluster to Loki by a DaemonSet.",
    ]) k8s.push(await post(content, 7));
    await indexMemories(h.db, [dupOld, dupNew, contraOld, contraNew, ...k8s]);
    const runId = await dream(hubId);
    const actionOf = (type: string, memoryId: string) => h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: type, sourceMemoryIds: { has: memoryId } } });
    const updates = async (memoryId: string) => h.db.event.findMany({ where: { type: "memory.updated", entityId: memoryId, actorId: owner.id } });

    for (const [type, memoryId] of [["archive", stale], ["merge", dupOld], ["organize", k8s[0]!]] as const) {
      const before = (await updates(memoryId)).length;
      const undo = await owner.post(`/v1/dreams/actions/${(await actionOf(type, memoryId)).id}/undo`);
      expect(undo.status, undo.text).toBe(200);
      expect((await updates(memoryId)).length, type).toBe(before + 1);
    }
    const review = await actionOf("contradiction", contraOld);
    const resolved = await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_b" });
    expect(resolved.status, resolved.text).toBe(200);
    expect(await state(contraOld)).toBe("archived");
    expect(await updates(contraOld)).toHaveLength(1);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/undo`)).status).toBe(200);
    expect(await state(contraOld)).toBe("active");
    expect(await updates(contraOld)).toHaveLength(2);
    expect(await updates(contraNew)).toHaveLength(0);
  }, 180_000);
});

describe("a topic a dream creates, on the event stream", () => {
  /**
   * topic.changed follows every change of a hub's topic tree, and an undo that deletes a dream's topic
   * sends one; the run that created it sent none, so a client keeping the tree by the stream learnt of
   * the topic's deletion but never of its creation.
   */
  it("is announced with a topic.changed naming it", async () => {
    const hubId = await h.teamHub(owner);
    const ids: string[] = [];
    for (const content of [
      "Kubernetes pods in the cluster are autoscaled with the horizontal pod autoscaler on CPU.",
      "Each Kubernetes deployment sets pod resource requests and limits for CPU and memory.",
      "Kubernetes pod logs are shipped from the cluster to Loki by a DaemonSet.",
    ]) {
      const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
    }
    await indexMemories(h.db, ids);
    const runId = await dream(hubId);
    const created = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "organize", createdTopic: true } });
    const events = await h.db.event.findMany({ where: { hubId, type: "topic.changed" } });
    expect(events.map((e) => e.entityId)).toEqual([created.toTopicId]);
    expect(events[0]!.actorId).toBeNull();
  }, 120_000);
});

describe("reopening a decided review whose archived side a member restored and archived again", () => {
  /**
   * Undoing a keep_a / keep_b brought the other side back whenever it was archived and still named the
   * kept one (superseded_by, which a restore by PATCH left): a member's own later archive was undone.
   */
  it("reopens the review and leaves that memory archived", async () => {
    const hubId = await h.teamHub(owner);
    const review = await flaggedReview(hubId);
    const loser = review.sourceMemoryIds[0]!;
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_b" })).status).toBe(200);
    expect(await state(loser)).toBe("archived");
    expect((await owner.patch(`/v1/memories/${loser}`, { state: "active" })).status).toBe(200);
    expect((await owner.patch(`/v1/memories/${loser}`, { state: "archived" })).status).toBe(200);
    const undo = await owner.post(`/v1/dreams/actions/${review.id}/undo`);
    expect(undo.status, undo.text).toBe(200);
    expect(undo.body.data).toMatchObject({ state: "pending_review", resolution: null });
    expect(await state(loser)).toBe("archived");

    // Decided again (A restored first, to be kept) and undone straight away, the side comes back as before.
    expect((await owner.patch(`/v1/memories/${loser}`, { state: "active" })).status).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_a" })).status).toBe(200);
    expect(await state(review.sourceMemoryIds[1]!)).toBe("archived");
    expect((await owner.post(`/v1/dreams/actions/${review.id}/undo`)).status).toBe(200);
    expect(await state(review.sourceMemoryIds[1]!)).toBe("active");
  }, 120_000);
});

describe("a memory a member ruled on, moved to another hub", () => {
  const move = async (ids: string[], hubId: string) => {
    const moved = await owner.post("/v1/memories/batch-move", { ids, hub_id: hubId });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.data.moved).toBe(ids.length);
  };

  /**
   * The run looked up a memory's dream history (restores, split merges, decided reviews) in its own hub
   * only: once moved, the new hub's first run archived again the memory a member had restored, merged
   * again the pair a member had split, and flagged again the pair a member had decided.
   */
  it("keeps the member's restore, split and decision in the hub it moved to", async () => {
    const from = await h.teamHub(owner);
    const to = await h.teamHub(owner);
    const stale = await staleMemory(from, "Temporary note: the office wifi password changes next week.");
    const [splitOld, splitNew] = await pairOfNotes(from, ["Use pnpm, not npm, for installing dependencies in the web repo.", "In the web repo we install dependencies with pnpm instead of npm."]);
    const [keptA, keptB] = await pairOfNotes(from, ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."]);
    const first = await dream(from);
    const actionOf = (type: string, memoryId: string) => h.db.dreamAction.findFirstOrThrow({ where: { runId: first, actionType: type, sourceMemoryIds: { has: memoryId } } });
    expect((await owner.patch(`/v1/memories/${stale}`, { state: "active" })).status).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${(await actionOf("merge", splitOld!)).id}/undo`)).status).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${(await actionOf("contradiction", keptA!)).id}/resolve`, { resolution: "keep_both" })).status).toBe(200);

    await move([stale, splitOld!, splitNew!, keptA!, keptB!], to);
    const second = await dream(to);
    expect(await h.db.dreamAction.findMany({ where: { runId: second, actionType: { in: ["merge", "contradiction", "archive"] } }, select: { actionType: true, reason: true } })).toEqual([]);
    for (const id of [stale, splitOld!, splitNew!, keptA!, keptB!]) expect(await state(id)).toBe("active");
  }, 180_000);

  /**
   * A review closed because its memory moved was decided by nobody: the pair together again in another
   * hub is flagged there, for its members to decide.
   */
  it("is flagged again where it is when its review was closed by a move, not decided", async () => {
    const from = await h.teamHub(owner);
    const to = await h.teamHub(owner);
    const [a, b] = await pairOfNotes(from, ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."]);
    await dream(from);
    await move([a!], to);
    await move([b!], to);
    const second = await dream(to);
    expect(await h.db.dreamAction.count({ where: { runId: second, actionType: "contradiction" } })).toBe(1);

    // Back where it was flagged first, as undecided as ever: flagged again there too.
    await move([a!], from);
    await move([b!], from);
    const third = await dream(from);
    expect(await h.db.dreamAction.count({ where: { runId: third, actionType: "contradiction" } })).toBe(1);
  }, 180_000);
});

describe("a new topic removed in its batch at the hub's topic limit", () => {
  /**
   * A cluster's topic whose every memory a member rewrote since the scan is removed at the end of its
   * batch, but it had taken that batch's room under the hub's limit: with room for one topic left, a
   * later cluster of the same batch found none and stayed unsorted until the next run.
   */
  it("gives its room back to a later cluster of the batch", async () => {
    const hubId = await h.teamHub(owner);
    // Room for two more topics when the run plans; a member takes one of them before the batch.
    await h.db.topic.createMany({ data: Array.from({ length: MAX_TOPICS_PER_HUB - 2 }, (_, i) => ({ id: newId(), hubId, name: `Topic ${i}`, position: i })) });
    const post = async (content: string) => {
      const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      return res.body.data.id as string;
    };
    const rewritten: string[] = [];
    for (const content of [
      "Kubernetes pods in the cluster are autoscaled with the horizontal pod autoscaler on CPU.",
      "Each Kubernetes deployment sets pod resource requests and limits for CPU and memory.",
      "Kubernetes pod logs are shipped from the cluster to Loki by a DaemonSet.",
      "Restart a stuck Kubernetes pod with kubectl rollout restart on its deployment.",
    ])
      rewritten.push(await post(content));
    const filed: string[] = [];
    for (const content of [
      "The Stripe webhook signing secret is stored in Vault under payments.",
      "Stripe webhook events are verified with the signing secret kept in Vault.",
      "Rotate the Stripe webhook signing secret in Vault every quarter.",
    ])
      filed.push(await post(content));
    await indexMemories(h.db, [...rewritten, ...filed]);
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig();
    expect(await claimDreamRun(h.db, run.run_id, "worker", new Date(), config.staleRunMs)).toBe(true);
    await runDreamPhase({ db: h.db, sql: h.database.sql, config }, run.run_id, "worker", "similar");
    await runDreamPhase({ db: h.db, sql: h.database.sql, config }, run.run_id, "worker", "stale");
    // After the organize step's plan, before its batch: the larger cluster, planned first, is rewritten.
    const db = changedBefore(h.db, ["$transaction"], async () => {
      expect((await owner.post("/v1/topics", { name: "Members' own", hub_id: hubId })).status).toBe(201);
      for (const id of rewritten) expect((await owner.patch(`/v1/memories/${id}`, { content: `Rewritten by a member: ${id}` })).status).toBe(200);
    });
    await runDreamPhase({ db, sql: h.database.sql, config }, run.run_id, "worker", "organize");
    const placed = await h.db.memory.findMany({ where: { id: { in: filed } }, select: { topicId: true } });
    expect(placed.every((m) => m.topicId !== null), "the later cluster is filed").toBe(true);
    expect(new Set(placed.map((m) => m.topicId)).size).toBe(1);
    expect(await h.db.topic.count({ where: { hubId } })).toBe(MAX_TOPICS_PER_HUB);
    const metrics = (await h.db.dreamRun.findUniqueOrThrow({ where: { id: run.run_id } })).phaseMetrics as Record<string, Record<string, number>>;
    expect(metrics.organize).toMatchObject({ topics_created: 1, actions: 3 });
  }, 180_000);
});

describe("a run's bounds, across a resume", () => {
  /**
   * The stale step archives at most ENGRAM_DREAM_MAX_STALE_PER_RUN memories per run, but counted only
   * what the current attempt archived: a run that crashed (or an Inngest step retried) after a stale
   * batch archived up to the bound again on its resume.
   */
  it("archives no more stale memories than the run's bound in all", async () => {
    const hubId = await h.teamHub(owner);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await staleMemory(hubId, `Temporary note ${i}: the ${["red", "green", "blue", "amber", "violet"][i]} meeting room is booked next ${["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"][i]}.`));
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig({ maxStalePerRun: 3, batchSize: 2 });
    expect(await claimDreamRun(h.db, run.run_id, "doomed", new Date(), config.staleRunMs)).toBe(true);
    const crash = new Error("simulated crash");
    const afterBatch = (phase: string) => {
      if (phase === "stale") throw crash;
    };
    await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, run.run_id, "doomed")).rejects.toBe(crash);
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "archive" } })).toBe(2);
    expect(await claimDreamRun(h.db, run.run_id, "rescuer", new Date(Date.now() + 3_600_000), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, run.run_id, "rescuer")).toBe("completed");
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "archive" } })).toBe(3);
    expect(await h.db.memory.count({ where: { id: { in: ids }, state: "archived" } })).toBe(3);
  }, 120_000);
});

describe("a run's contradiction reviews, across a resume", () => {
  /**
   * The similar step flagged every contradiction it found, each a review_contradiction notification
   * for every owner and admin of the hub: a hub with many contradictions and admins got a flood of
   * them in one run. Reviews are now bounded per run (ENGRAM_DREAM_MAX_REVIEWS_PER_RUN), counted
   * across the run's attempts as its other bounds are; the rest are flagged by the next runs.
   */
  it("flags no more pairs than the run's bound in all, and notifies each manager of those only", async () => {
    const hubId = await h.teamHub(owner);
    const admin = await h.user("Admin of many reviews");
    await h.db.hubMember.create({ data: { hubId, userId: admin.id, role: "admin" } });
    await pairOfNotes(hubId, ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."]);
    await pairOfNotes(hubId, ["The database connection pool size is 10 connections.", "The database connection pool size is 20 connections."]);
    await pairOfNotes(hubId, ["The session cookie lifetime is 14 days.", "The session cookie lifetime is 30 days."]);
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig({ batchSize: 1 });
    const saved = process.env.ENGRAM_DREAM_MAX_REVIEWS_PER_RUN;
    process.env.ENGRAM_DREAM_MAX_REVIEWS_PER_RUN = "2";
    try {
      expect(await claimDreamRun(h.db, run.run_id, "doomed", new Date(), config.staleRunMs)).toBe(true);
      const crash = new Error("simulated crash");
      // A crash right after the first review is written.
      const afterBatch = async (phase: string) => {
        if (phase === "similar" && (await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "contradiction" } })) > 0) throw crash;
      };
      await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, run.run_id, "doomed")).rejects.toBe(crash);
      expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "contradiction" } })).toBe(1);
      expect(await claimDreamRun(h.db, run.run_id, "rescuer", new Date(Date.now() + 3_600_000), config.staleRunMs)).toBe(true);
      expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, run.run_id, "rescuer")).toBe("completed");
    } finally {
      if (saved === undefined) delete process.env.ENGRAM_DREAM_MAX_REVIEWS_PER_RUN;
      else process.env.ENGRAM_DREAM_MAX_REVIEWS_PER_RUN = saved;
    }
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "contradiction" } })).toBe(2);
    for (const userId of [owner.id, admin.id]) expect(await h.db.notification.count({ where: { userId, hubId, kind: "review_contradiction" } })).toBe(2);
    // The pair left over is flagged by the next run.
    await dream(hubId);
    expect(await h.db.dreamAction.count({ where: { hubId, actionType: "contradiction" } })).toBe(3);
  }, 180_000);
});

describe("contradictions left over a run's bound", () => {
  /**
   * "The pairs left over are flagged by the next runs" (docs/dreams.md), but a run that hit the bound
   * ended completed, and the schedule took a hub again only after a write or a run out of time: a hub
   * nobody wrote to again kept its leftover contradictions unflagged for good. The run records how
   * many it left (phase_metrics.similar.reviews_left), and such a hub is due once the interval passes.
   */
  it("makes the hub due again without a write until every pair is flagged", async () => {
    const hubId = await h.teamHub(owner);
    await pairOfNotes(hubId, ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."]);
    await pairOfNotes(hubId, ["The database connection pool size is 10 connections.", "The database connection pool size is 20 connections."]);
    await pairOfNotes(hubId, ["The session cookie lifetime is 14 days.", "The session cookie lifetime is 30 days."]);
    const saved = process.env.ENGRAM_DREAM_MAX_REVIEWS_PER_RUN;
    process.env.ENGRAM_DREAM_MAX_REVIEWS_PER_RUN = "2";
    const HOUR = 3_600_000;
    try {
      const first = await queueDreamRun(h.db, hubId, null, new Date());
      expect(await runDreamRunOnce(h.db, first.run_id)).toBe(true);
      const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: first.run_id } });
      expect(run.status).toBe("completed");
      expect(await h.db.dreamAction.count({ where: { runId: first.run_id, actionType: "contradiction" } })).toBe(2);
      expect((run.phaseMetrics as Record<string, Record<string, number>>).similar).toMatchObject({ reviews_left: 1 });
      expect(await dueHubs(h.db, new Date(), 24, 100_000)).not.toContain(hubId);
      expect(await dueHubs(h.db, new Date(Date.now() + 25 * HOUR), 24, 100_000)).toContain(hubId);
      const next = await queueDreamRun(h.db, hubId, null, new Date());
      expect(await runDreamRunOnce(h.db, next.run_id)).toBe(true);
      expect(await h.db.dreamAction.count({ where: { hubId, actionType: "contradiction" } })).toBe(3);
      // Nothing left: not due again without a write.
      expect(await dueHubs(h.db, new Date(Date.now() + 50 * HOUR), 24, 100_000)).not.toContain(hubId);
    } finally {
      if (saved === undefined) delete process.env.ENGRAM_DREAM_MAX_REVIEWS_PER_RUN;
      else process.env.ENGRAM_DREAM_MAX_REVIEWS_PER_RUN = saved;
    }
  }, 180_000);
});

describe("a run's new topics, across a resume", () => {
  /** At most 20 new topics a run (maxNewTopicsPerRun), but counted per attempt: a resumed run made up to 20 more. */
  it("makes no more new topics than the run's bound in all", async () => {
    const hubId = await h.teamHub(owner);
    const ids: string[] = [];
    for (const content of [
      "Kubernetes pods in the cluster are autoscaled with the horizontal pod autoscaler on CPU.",
      "Each Kubernetes deployment sets pod resource requests and limits for CPU and memory.",
      "Kubernetes pod logs are shipped from the cluster to Loki by a DaemonSet.",
      "Restart a stuck Kubernetes pod with kubectl rollout restart on its deployment.",
      "The Stripe webhook signing secret is stored in Vault under payments.",
      "Stripe webhook events are verified with the signing secret kept in Vault.",
      "Rotate the Stripe webhook signing secret in Vault every quarter.",
    ]) {
      const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
    }
    await indexMemories(h.db, ids);
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig({ maxNewTopicsPerRun: 1 });
    expect(await claimDreamRun(h.db, run.run_id, "doomed", new Date(), config.staleRunMs)).toBe(true);
    const crash = new Error("simulated crash");
    const afterBatch = (phase: string) => {
      if (phase === "organize") throw crash;
    };
    await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, run.run_id, "doomed")).rejects.toBe(crash);
    expect(await h.db.topic.count({ where: { hubId } })).toBe(1);
    expect(await claimDreamRun(h.db, run.run_id, "rescuer", new Date(Date.now() + 3_600_000), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, run.run_id, "rescuer")).toBe("completed");
    expect(await h.db.topic.count({ where: { hubId } })).toBe(1);
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "organize", createdTopic: true } })).toBe(1);
  }, 120_000);
});

describe("a hub purged while its run compares its memories", () => {
  /**
   * The similar step read its hub's name with findUniqueOrThrow: a purge finishing between the run's
   * scan and that read (its cascade takes the run's row too) threw "No record was found", and the run,
   * gone with its hub, was logged as failed (an Inngest step failed and retried), where every other
   * read of a purged run ends it quietly as a lease lost.
   */
  it("ends the run as a lease lost, not as a failure", async () => {
    const hubId = await h.teamHub(owner);
    await pairOfNotes(hubId, ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."]);
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig();
    expect(await claimDreamRun(h.db, run.run_id, "worker", new Date(), config.staleRunMs)).toBe(true);
    const db = changedBefore(h.db, ["hub.findUniqueOrThrow", "hub.findUnique"], () => h.db.hub.delete({ where: { id: hubId } }));
    await expect(runDreamPhase({ db, sql: h.database.sql, config }, run.run_id, "worker", "similar")).rejects.toBeInstanceOf(LostLeaseError);
  }, 120_000);
});

describe("deciding a review whose side to archive a member edited since it was flagged", () => {
  /**
   * keep_a / keep_b archived the other memory whatever a member wrote to it after the review was flagged,
   * though the review (and the Dreams tab's excerpts) show the text as the run read it: a rewrite that
   * settled the disagreement was archived unseen. The decision is refused (409, naming the memory and its
   * version) unless the client names that version, having read the memory as it is now.
   */
  it("is a 409 until the client names the memory's current version", async () => {
    const hubId = await h.teamHub(owner);
    const [a, b] = await pairOfNotes(hubId, ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."]);
    const runId = await dream(hubId);
    const review = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "contradiction" } });
    const [older] = review.sourceMemoryIds;
    const edited = older === a ? a! : b!;
    const edit = await owner.patch(`/v1/memories/${edited}`, { content: "The API request timeout is 60 seconds since the proxy change." });
    expect(edit.status, edit.text).toBe(200);
    const version: number = edit.body.data.version;
    // keep_b archives A (the older side, the one edited).
    const refused = await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_b" });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "conflict", details: { memory_id: edited, version } });
    expect(await state(edited)).toBe("active");
    expect((await h.db.dreamAction.findUniqueOrThrow({ where: { id: review.id } })).state).toBe("pending_review");
    // A version the memory has moved past since is refused the same way.
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_b", version: version - 1 })).status).toBe(409);
    const decided = await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_b", version });
    expect(decided.status, decided.text).toBe(200);
    expect(await state(edited)).toBe("archived");
  }, 120_000);

  it("through the notification (Memax's clients, which send no version) decides as chosen", async () => {
    const hubId = await h.teamHub(owner);
    const review = await flaggedReview(hubId);
    const [older, newer] = review.sourceMemoryIds;
    expect((await owner.patch(`/v1/memories/${older}`, { content: "The API request timeout is 30 seconds, set in the gateway." })).status).toBe(200);
    const notification = await h.db.notification.findFirstOrThrow({ where: { userId: owner.id, kind: "review_contradiction", sourceId: review.id } });
    // keep_b archives the edited older side: the 409 would leave Memax's clients no way to decide it.
    const res = await owner.post(`/v1/notifications/${notification.id}/resolve`, { action: "keep_b" });
    expect(res.status, res.text).toBe(200);
    expect([await state(older!), await state(newer!)]).toEqual(["archived", "active"]);
  }, 120_000);

  it("keeps the edited side, or decides an unedited pair, without a version", async () => {
    const hubId = await h.teamHub(owner);
    const review = await flaggedReview(hubId);
    const [older, newer] = review.sourceMemoryIds;
    expect((await owner.patch(`/v1/memories/${older}`, { content: "The API request timeout is 30 seconds, set in the gateway." })).status).toBe(200);
    // keep_a keeps the edited older side and archives the unedited newer one.
    const res = await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_a" });
    expect(res.status, res.text).toBe(200);
    expect([await state(older!), await state(newer!)]).toEqual(["active", "archived"]);
  }, 120_000);
});

describe("a review's edit check compares the memory with itself, not with the run's clock", () => {
  const PAIR: [string, string] = ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."];

  /** A run whose worker's clock is `skewMs` off the API server's (another machine under Inngest). */
  async function dreamAt(hubId: string, skewMs: number): Promise<string> {
    const at = () => new Date(Date.now() + skewMs);
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig();
    expect(await claimDreamRun(h.db, run.run_id, "skewed", at(), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config, now: at }, run.run_id, "skewed")).toBe("completed");
    return run.run_id;
  }

  /**
   * The check read the side's content_changed_at (the clock of whoever last wrote it, moved forward by
   * the database) against the review's created_at (the dream worker's clock): a side last written by a
   * server whose clock runs ahead looked "edited since", and every keep of the other side was refused.
   */
  it("decides a pair nobody edited since, whatever clock last wrote it", async () => {
    const hubId = await h.teamHub(owner);
    const [, later] = await pairOfNotes(hubId, PAIR);
    const ahead = new Date(Date.now() + 10 * 60_000);
    await backdateMemories(h.db, later!, { updatedAt: ahead });
    const runId = await dream(hubId);
    const review = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "contradiction" } });
    const [a, b] = review.sourceMemoryIds;
    expect(b).toBe(later);
    const res = await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_a" });
    expect(res.status, res.text).toBe(200);
    expect([await state(a!), await state(b!)]).toEqual(["active", "archived"]);
  }, 120_000);

  /** The other way round: a worker whose clock runs ahead made every later edit look older than the review. */
  it("refuses a side edited after the review, however far ahead the worker's clock ran", async () => {
    const hubId = await h.teamHub(owner);
    await pairOfNotes(hubId, PAIR);
    const runId = await dreamAt(hubId, 3_600_000);
    const review = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "contradiction" } });
    const [a, b] = review.sourceMemoryIds;
    const edit = await owner.patch(`/v1/memories/${a}`, { content: "The API request timeout is 30 seconds, set in the gateway." });
    expect(edit.status, edit.text).toBe(200);
    const refused = await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_b" });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "conflict", details: { memory_id: a, version: edit.body.data.version } });
    expect([await state(a!), await state(b!)]).toEqual(["active", "active"]);
    // Through the notification (no version, no check) it decides as chosen.
    const notification = await h.db.notification.findFirstOrThrow({ where: { userId: owner.id, kind: "review_contradiction", sourceId: review.id } });
    const decided = await owner.post(`/v1/notifications/${notification.id}/resolve`, { action: "keep_b" });
    expect(decided.status, decided.text).toBe(200);
    expect([await state(a!), await state(b!)]).toEqual(["archived", "active"]);
  }, 120_000);

  it("records each side's version and text time in the review's details", async () => {
    const hubId = await h.teamHub(owner);
    const [first, second] = await pairOfNotes(hubId, PAIR);
    const runId = await dream(hubId);
    const review = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "contradiction" } });
    const rows = await h.db.memory.findMany({ where: { id: { in: [first!, second!] } }, select: { id: true, version: true, contentChangedAt: true } });
    const of = (id: string) => rows.find((row) => row.id === id)!;
    const [a, b] = review.sourceMemoryIds;
    expect(review.details).toMatchObject({
      a: { id: a, version: of(a!).version, content_changed_at: of(a!).contentChangedAt.toISOString() },
      b: { id: b, version: of(b!).version, content_changed_at: of(b!).contentChangedAt.toISOString() },
    });
  }, 120_000);

  /**
   * Reviews flagged before their sides' text times were recorded are checked as before (content_changed_at
   * against the review's created_at), by either route: the notification's still decides as chosen.
   */
  it("checks a review flagged before by its creation time, on both routes", async () => {
    const hubId = await h.teamHub(owner);
    await pairOfNotes(hubId, PAIR);
    const runId = await dream(hubId);
    const review = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "contradiction" } });
    const details = review.details as { a: Record<string, string>; b: Record<string, string> };
    const strip = ({ version: _v, content_changed_at: _c, ...side }: Record<string, string>) => side;
    await h.db.dreamAction.update({ where: { id: review.id }, data: { details: { ...details, a: strip(details.a), b: strip(details.b) } } });
    const [a, b] = review.sourceMemoryIds;
    expect((await owner.patch(`/v1/memories/${a}`, { content: "The API request timeout is 30 seconds, set in the gateway." })).status).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_b" })).status).toBe(409);
    const notification = await h.db.notification.findFirstOrThrow({ where: { userId: owner.id, kind: "review_contradiction", sourceId: review.id } });
    const decided = await owner.post(`/v1/notifications/${notification.id}/resolve`, { action: "keep_b" });
    expect(decided.status, decided.text).toBe(200);
    expect([await state(a!), await state(b!)]).toEqual(["archived", "active"]);
  }, 120_000);
});

describe("the memories a run archives", () => {
  /**
   * A member's archive (PATCH, a review's decision) is a memory.updated; the run's own (the older side
   * of a merge, a stale memory) sent none, so a client keeping its list by the event stream, or a
   * webhook, still showed both memories active. Each is announced now, with no actor, as the run's
   * rewrite of a merge's kept memory is.
   */
  it("announces each with a memory.updated", async () => {
    const hubId = await h.teamHub(owner);
    const [older, newer] = await pairOfNotes(hubId, ["Use pnpm, not npm, for installing dependencies in the web repo.", "In the web repo we install dependencies with pnpm instead of npm."]);
    const stale = await staleMemory(hubId, "The quarterly offsite moved to the lakeside venue with the blue boathouse.");
    const since = new Date();
    const runId = await dream(hubId);
    expect(await state(older!)).toBe("archived");
    expect(await state(newer!)).toBe("active");
    expect(await state(stale)).toBe("archived");
    expect(await h.db.dreamAction.count({ where: { runId, actionType: { in: ["merge", "archive"] } } })).toBe(2);
    const events = await h.db.event.findMany({ where: { hubId, type: "memory.updated", createdAt: { gte: since } }, select: { entityId: true, actorId: true } });
    expect(events.map((e) => e.entityId).sort()).toEqual([older!, stale].sort());
    expect(events.every((e) => e.actorId === null)).toBe(true);
  }, 120_000);
});

describe("a decided review reopened after a manager was demoted", () => {
  /**
   * Undoing the decision put every recipient's row back to pending, that of an admin demoted since
   * included: a decision in their bell they may no longer take (resolving it is a 403). Only the rows of
   * the hub's owners and admins of now are reopened. The demoted admin's row stayed `resolved / kept_both`
   * for a review pending again (and a later, different decision never corrected it): it expires.
   */
  it("reopens the rows of the hub's managers only", async () => {
    const admin = await h.user("Demoted admin");
    const hubId = await h.teamHub(owner, [[admin, "admin"]]);
    const review = await flaggedReview(hubId);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_both" })).status).toBe(200);
    const demoted = await owner.patch(`/v1/hubs/${hubId}/members/${admin.id}`, { role: "contributor" });
    expect(demoted.status, demoted.text).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/undo`)).status).toBe(200);
    const rows = await h.db.notification.findMany({ where: { kind: "review_contradiction", sourceId: review.id }, select: { userId: true, status: true, resolution: true } });
    expect(rows.find((row) => row.userId === owner.id)).toMatchObject({ status: "pending", resolution: null });
    // Not `resolved / kept_both` for a review pending again: the demoted admin's row expires, as a row of
    // a decision they can no longer take does.
    expect(rows.find((row) => row.userId === admin.id)).toMatchObject({ status: "expired", resolution: null });
    // A later, different decision leaves it so (it closes pending rows only).
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_a" })).status).toBe(200);
    const after = await h.db.notification.findMany({ where: { kind: "review_contradiction", sourceId: review.id }, select: { userId: true, status: true, resolution: true } });
    expect(after.find((row) => row.userId === owner.id)).toMatchObject({ status: "resolved", resolution: "kept_a" });
    expect(after.find((row) => row.userId === admin.id)).toMatchObject({ status: "expired", resolution: null });
  }, 120_000);
});

describe("a decided review reopened after a manager was demoted to a contributor who still decides", () => {
  /**
   * Undoing the decision expired the row of every member below admin, a demoted admin's included, even
   * with allow_contributor_dreams on: that member may still decide the review (the dream's route, the
   * bell), as a demotion with a review open leaves their row pending. Their row is pending again.
   */
  it("reopens the demoted admin's row", async () => {
    const admin = await h.user("Demoted admin who still decides");
    const hubId = await h.teamHub(owner, [[admin, "admin"]]);
    const review = await flaggedReview(hubId);
    expect((await owner.patch(`/v1/hubs/${hubId}`, { allow_contributor_dreams: true })).status).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_both" })).status).toBe(200);
    expect((await owner.patch(`/v1/hubs/${hubId}/members/${admin.id}`, { role: "contributor" })).status).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/undo`)).status).toBe(200);
    const row = await h.db.notification.findFirstOrThrow({ where: { userId: admin.id, kind: "review_contradiction", sourceId: review.id } });
    expect(row).toMatchObject({ status: "pending", resolution: null });
    const decided = await admin.post(`/v1/notifications/${row.id}/resolve`, { action: "keep_both" });
    expect(decided.status, decided.text).toBe(200);
    expect((await h.db.notification.findFirstOrThrow({ where: { userId: owner.id, kind: "review_contradiction", sourceId: review.id } })).resolution).toBe("kept_both");
  }, 120_000);
});

describe("contributors' dreams turned off while a decision is undone", () => {
  /**
   * The settings change held the hub's membership lock shared, as the undo does: an undo that had read
   * allow_contributor_dreams still on reopened a demoted admin's row after the change had expired the
   * rows contributors could no longer decide, and the row stayed pending, a decision that answered 403.
   * Turning it off now takes that lock exclusively, as a demotion does: it waits for the undo, then
   * expires the row the undo reopened.
   */
  it.skipIf(!testPostgres())("leaves no contributor's row pending", async () => {
    const admin = await h.user("Demoted admin during an undo");
    const hubId = await h.teamHub(owner, [[admin, "admin"]]);
    const review = await flaggedReview(hubId);
    expect((await owner.patch(`/v1/hubs/${hubId}`, { allow_contributor_dreams: true })).status).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_both" })).status).toBe(200);
    expect((await owner.patch(`/v1/hubs/${hubId}/members/${admin.id}`, { role: "contributor" })).status).toBe(200);
    const row = () => h.db.notification.findFirstOrThrow({ where: { userId: admin.id, kind: "review_contradiction", sourceId: review.id } });
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    const blocked = async () => ((await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))")).rows[0] as { n: number }).n;
    let undo: Promise<{ status: number; text: string }> | undefined;
    let off: Promise<{ status: number; text: string }> | undefined;
    try {
      await side.query("BEGIN");
      // The undo stalls on the demoted admin's row, after it has read the hub's setting.
      await side.query("SELECT 1 FROM notifications WHERE id = $1 FOR UPDATE", [(await row()).id]);
      undo = owner.post(`/v1/dreams/actions/${review.id}/undo`);
      for (let waited = 0; (await blocked()) < 1; waited += 20) {
        if (waited > 20_000) throw new Error("the undo never waited for the row");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      let settled = false;
      off = owner.patch(`/v1/hubs/${hubId}`, { allow_contributor_dreams: false }).finally(() => (settled = true));
      // Until the change either lands or waits for the undo.
      for (let waited = 0; !settled; waited += 20) {
        if (waited > 2_000) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    const [undone, changed] = [await undo!, await off!];
    expect(undone.status, undone.text).toBe(200);
    expect(changed.status, changed.text).toBe(200);
    expect(await row()).toMatchObject({ status: "expired", resolution: null });
  }, 120_000);
});

describe("contributors' dreams turned off between a contributor's check and their decision", () => {
  /**
   * The decision read the caller's role again under the hub's membership lock, but judged it by the hub's
   * allow_contributor_dreams as read before the transaction: turned off in between, a contributor still
   * archived a side of the review. The hub's permissions are read again with the role.
   */
  it("refuses the decision", async () => {
    const contributor = await h.user("Contributor deciding late");
    const hubId = await h.teamHub(owner, [[contributor, "contributor"]]);
    const review = await flaggedReview(hubId);
    expect((await owner.patch(`/v1/hubs/${hubId}`, { allow_contributor_dreams: true })).status).toBe(200);
    const turnedOff = async () => expect((await owner.patch(`/v1/hubs/${hubId}`, { allow_contributor_dreams: false })).status).toBe(200);
    const late = resolveDreamAction(sessionContext(h, contributor, changedBefore(h.db, ["$transaction"], turnedOff)), review.id, "keep_a");
    await expect(late).rejects.toMatchObject({ code: "forbidden" });
    expect(await h.db.dreamAction.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ state: "pending_review", resolution: null });
    expect(await state(review.sourceMemoryIds[1]!)).toBe("active");
  }, 120_000);
});

describe("a manager demoted with a review open", () => {
  /**
   * A change of role touched no review_contradiction row: an admin demoted to contributor (the hub's
   * allow_contributor_dreams off) or to viewer kept a pending decision in their bell that resolving
   * answered 403. Their open rows expire with the demotion, unless the hub lets contributors dream, in
   * which case a contributor still decides it.
   */
  it("expires the rows they can no longer decide, and keeps those a contributor may still decide", async () => {
    const [toContributor, toViewer, allowed] = [await h.user("Admin to contributor"), await h.user("Admin to viewer"), await h.user("Admin allowed")];
    const hubId = await h.teamHub(owner, [
      [toContributor, "admin"],
      [toViewer, "admin"],
      [allowed, "admin"],
    ]);
    const review = await flaggedReview(hubId);
    const row = (userId: string) => h.db.notification.findFirstOrThrow({ where: { userId, kind: "review_contradiction", sourceId: review.id } });
    for (const who of [toContributor, toViewer, allowed]) expect((await row(who.id)).status).toBe("pending");

    expect((await owner.patch(`/v1/hubs/${hubId}/members/${toContributor.id}`, { role: "contributor" })).status).toBe(200);
    expect((await owner.patch(`/v1/hubs/${hubId}/members/${toViewer.id}`, { role: "viewer" })).status).toBe(200);
    for (const who of [toContributor, toViewer]) {
      expect(await row(who.id)).toMatchObject({ status: "expired", resolution: null });
      const pending = await who.get(`/v1/notifications?kind=review_contradiction&hub=${hubId}&status=pending`);
      expect(pending.body.data.notifications).toEqual([]);
    }

    // With contributors allowed to dream, a demoted admin still decides the review from the bell.
    expect((await owner.patch(`/v1/hubs/${hubId}`, { allow_contributor_dreams: true })).status).toBe(200);
    expect((await owner.patch(`/v1/hubs/${hubId}/members/${allowed.id}`, { role: "contributor" })).status).toBe(200);
    const kept = await row(allowed.id);
    expect(kept.status).toBe("pending");
    const decided = await allowed.post(`/v1/notifications/${kept.id}/resolve`, { action: "keep_both" });
    expect(decided.status, decided.text).toBe(200);
    expect((await row(owner.id)).resolution).toBe("kept_both");
  }, 120_000);
});

describe("contributors' dreams turned off with a demoted admin's review open", () => {
  /**
   * A contributor kept an open review row while the hub let contributors dream (an admin demoted then);
   * turning allow_contributor_dreams off left it pending, a decision resolving answered 403. It expires.
   */
  it("expires the review rows contributors can no longer decide", async () => {
    const admin = await h.user("Admin kept as contributor");
    const hubId = await h.teamHub(owner, [[admin, "admin"]]);
    const review = await flaggedReview(hubId);
    const row = (userId: string) => h.db.notification.findFirstOrThrow({ where: { userId, kind: "review_contradiction", sourceId: review.id } });
    expect((await owner.patch(`/v1/hubs/${hubId}`, { allow_contributor_dreams: true })).status).toBe(200);
    expect((await owner.patch(`/v1/hubs/${hubId}/members/${admin.id}`, { role: "contributor" })).status).toBe(200);
    expect((await row(admin.id)).status).toBe("pending");
    expect((await owner.patch(`/v1/hubs/${hubId}`, { allow_contributor_dreams: false })).status).toBe(200);
    expect(await row(admin.id)).toMatchObject({ status: "expired", resolution: null });
    expect((await row(owner.id)).status).toBe("pending");
  }, 120_000);
});

describe("a decided review reopened with managers who have no open row of it", () => {
  /**
   * docs/dreams.md says an undo reopens the review for the hub's owners and admins of now, but only rows
   * that existed and were closed by the decision came back: an admin promoted after the review was
   * flagged (no row), or one whose row expired when demoted and who was promoted again, had none to decide
   * from. Each manager of now gets the review's row, pending, as the flag wrote it.
   */
  it("gives every owner and admin of now a pending row", async () => {
    const [later, again] = [await h.user("Promoted later"), await h.user("Promoted again")];
    const hubId = await h.teamHub(owner, [
      [later, "contributor"],
      [again, "admin"],
    ]);
    const review = await flaggedReview(hubId);
    const rows = () => h.db.notification.findMany({ where: { kind: "review_contradiction", sourceId: review.id } });
    expect((await rows()).map((row) => row.userId).sort()).toEqual([owner.id, again.id].sort());
    expect((await owner.patch(`/v1/hubs/${hubId}/members/${again.id}`, { role: "viewer" })).status).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_both" })).status).toBe(200);
    for (const who of [later, again]) expect((await owner.patch(`/v1/hubs/${hubId}/members/${who.id}`, { role: "admin" })).status).toBe(200);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/undo`)).status).toBe(200);

    const after = await rows();
    const ownerRow = after.find((row) => row.userId === owner.id)!;
    for (const who of [owner, later, again]) {
      const mine = after.filter((row) => row.userId === who.id);
      expect(mine).toHaveLength(1);
      expect(mine[0]).toMatchObject({ status: "pending", resolution: null, hubId, sourceKind: "dream_action" });
      expect(mine[0]!.payload).toEqual(ownerRow.payload);
    }
    const promoted = after.find((row) => row.userId === later.id)!;
    const decided = await later.post(`/v1/notifications/${promoted.id}/resolve`, { action: "keep_both" });
    expect(decided.status, decided.text).toBe(200);
    expect((await rows()).every((row) => row.status === "resolved" && row.resolution === "kept_both")).toBe(true);
  }, 120_000);

  it("writes the row from the review itself when no row of it is left (pruned)", async () => {
    const hubId = await h.teamHub(owner);
    const review = await flaggedReview(hubId);
    const flagged = await h.db.notification.findFirstOrThrow({ where: { kind: "review_contradiction", sourceId: review.id } });
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_both" })).status).toBe(200);
    await h.db.notification.deleteMany({ where: { kind: "review_contradiction", sourceId: review.id } });
    expect((await owner.post(`/v1/dreams/actions/${review.id}/undo`)).status).toBe(200);
    const row = await h.db.notification.findFirstOrThrow({ where: { kind: "review_contradiction", sourceId: review.id } });
    expect(row).toMatchObject({ userId: owner.id, status: "pending", hubId });
    expect(row.payload).toEqual(flagged.payload);
  }, 120_000);
});
