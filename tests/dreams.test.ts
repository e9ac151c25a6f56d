import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { InngestTestEngine, mockCtx } from "@inngest/test";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { DREAM_RUN_EVENT, dueHubs, pendingDreamRuns, runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { claimDreamRun, DREAM_PHASES, executeDreamRun, finishDreamRun, LostLeaseError, runDreamPhase } from "@/lib/dreams/run-dream.ts";
import { DELETED_REASON } from "@/lib/memories/drop-memory-copies.ts";
import { dreamRunFunction, dreamScheduleFunction } from "@/inngest/dream-functions.ts";
import { newId } from "@/lib/ids.ts";
import { notifyProcessingFailed, onContradictionsFlagged } from "@/lib/notifications/notify.ts";
import { resolveDreamAction, undoDreamAction } from "@/lib/dreams/undo-dream-action.ts";
import { triggerDream } from "@/lib/dreams/trigger-dream.ts";
import type { HubContext } from "@/lib/api/context.ts";
import { indexMemories } from "./recall-helpers.ts";
import pg from "pg";
import { backdateMemories } from "./support/backdate-memories.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";
import { longestWith, readSpy } from "./support/read-spy.ts";

let h: Harness;
let owner: Client;
beforeAll(async () => {
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  await h?.close();
});

const DAY = 86_400_000;

/** The planted hub: every memory with its role in the test. */
const PLANTED = {
  dupOld1: "Use pnpm, not npm, for installing dependencies in the web repo.",
  dupNew1: "In the web repo we install dependencies with pnpm instead of npm.",
  dupOld2: "Deploys to production happen every Tuesday after the standup, using the release script.",
  dupNew2: "Production deploys happen each Tuesday after standup with the release script.",
  contraOld: "The API request timeout is 30 seconds.",
  contraNew: "The API request timeout is 60 seconds.",
  // Near-miss pairs: similar wording, a different key entity. Never merged.
  stripeLong: "To rotate the Stripe API key, open the Stripe dashboard, create a new restricted key and update STRIPE_KEY in Vault.",
  twilioLong: "To rotate the Twilio API key, open the Twilio console, create a new key and update TWILIO_KEY in Vault.",
  stripeShort: "Rotate the Stripe key every 90 days.",
  twilioShort: "Rotate the Twilio key every 90 days.",
  staging: "The staging database runs on Postgres 15 in eu-west-1.",
  production: "The production database runs on Postgres 15 in eu-west-1.",
  // Stale: old, never read, not stable.
  stale1: "Temporary note: the office wifi password changes next week.",
  stale2: "Reminder to renew the conference booth reservation before the deadline.",
  staleStable: "Our company was founded in 2014 in Lisbon.",
  staleRead: "The legacy billing export lives in the finance shared drive.",
  // Organize: an existing Frontend topic, unsorted memories that belong to it, and an unsorted Kubernetes cluster.
  front1: "React components live in src/components and use CSS modules for styling.",
  front2: "Every React component needs a Storybook story and a unit test with React Testing Library.",
  front3: "The frontend uses React 19 with the new compiler enabled for all pages.",
  frontUnsorted1: "New React components should be function components with hooks, styled with CSS modules.",
  frontUnsorted2: "React pages in the frontend load data with server components and Suspense boundaries.",
  k8s1: "Kubernetes pods in the cluster are autoscaled with the horizontal pod autoscaler on CPU.",
  k8s2: "Each Kubernetes deployment sets pod resource requests and limits for CPU and memory.",
  k8s3: "Kubernetes pod logs are shipped from the cluster to Loki by a DaemonSet.",
  k8s4: "Restart a stuck Kubernetes pod with kubectl rollout restart on its deployment.",
} as const;
type Key = keyof typeof PLANTED;

async function seedHub(): Promise<{ hubId: string; ids: Record<Key, string>; frontendTopic: string }> {
  const hubId = await h.teamHub(owner);
  const ids = {} as Record<Key, string>;
  const base = Date.now() - 10 * DAY;
  let i = 0;
  for (const key of Object.keys(PLANTED) as Key[]) {
    const res = await owner.post("/v1/memories", { content: PLANTED[key], stability: key === "staleStable" ? "stable" : "evolving" }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    ids[key] = res.body.data.id;
    // Older memories first: "Old" before "New" in every pair.
    const at = key.startsWith("stale") ? new Date(Date.now() - 200 * DAY) : new Date(base + i++ * 60_000);
    await backdateMemories(h.db, ids[key], { createdAt: at, updatedAt: at });
  }
  await h.db.memory.update({ where: { id: ids.staleRead }, data: { accessCount: 3, lastAccessedAt: new Date(Date.now() - 100 * DAY) } });
  const topic = await owner.post("/v1/topics", { name: "Frontend", hub_id: hubId });
  for (const key of ["front1", "front2", "front3"] as const) await h.db.memory.update({ where: { id: ids[key] }, data: { topicId: topic.body.data.id } });
  await indexMemories(h.db, Object.values(ids));
  return { hubId, ids, frontendTopic: topic.body.data.id };
}

async function trigger(client: Client, hubId: string) {
  return client.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
}

describe("a dream run over a planted hub", () => {
  let hubId: string;
  let ids: Record<Key, string>;
  let frontendTopic: string;
  let runId: string;

  beforeAll(async () => {
    ({ hubId, ids, frontendTopic } = await seedHub());
    const res = await trigger(owner, hubId);
    expect(res.status, res.text).toBe(202);
    expect(res.body.data).toEqual({ status: "queued", run_id: expect.any(String) });
    runId = res.body.data.run_id;
    expect(await runDreamRunOnce(h.db, runId)).toBe(true);
  }, 180_000);

  const memory = (key: Key) => h.db.memory.findUniqueOrThrow({ where: { id: ids[key] } });

  it("merges near-duplicates: the newer kept, the older archived with superseded_by", async () => {
    for (const [older, newer] of [["dupOld1", "dupNew1"], ["dupOld2", "dupNew2"]] as const) {
      expect(await memory(older)).toMatchObject({ state: "archived", supersededBy: ids[newer] });
      expect(await memory(newer)).toMatchObject({ state: "active", supersededBy: null });
    }
    const merges = await h.db.dreamAction.findMany({ where: { runId, actionType: "merge" } });
    expect(merges.map((m) => m.sourceMemoryIds).sort()).toEqual([[ids.dupOld1, ids.dupNew1], [ids.dupOld2, ids.dupNew2]].sort());
  });

  it("flags the contradiction for review and changes neither side", async () => {
    const reviews = await h.db.dreamAction.findMany({ where: { runId, actionType: "contradiction" } });
    expect(reviews).toHaveLength(1);
    expect(reviews[0]).toMatchObject({ state: "pending_review", sourceMemoryIds: [ids.contraOld, ids.contraNew] });
    expect(reviews[0]!.details).toMatchObject({ values: ["30 seconds", "60 seconds"], options: ["keep_a", "keep_b", "keep_both"], a: { id: ids.contraOld, excerpt: PLANTED.contraOld } });
    expect((await memory("contraOld")).state).toBe("active");
    expect((await memory("contraNew")).state).toBe("active");
  });

  it("never merges or flags near-miss pairs that differ in a key entity", async () => {
    const nearMiss = [ids.stripeLong, ids.twilioLong, ids.stripeShort, ids.twilioShort, ids.staging, ids.production];
    for (const id of nearMiss) expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).state).toBe("active");
    const touching = await h.db.dreamAction.findMany({ where: { runId, actionType: { in: ["merge", "contradiction"] }, sourceMemoryIds: { hasSome: nearMiss } } });
    expect(touching).toEqual([]);
  });

  it("archives stale memories, but not stable or read ones", async () => {
    expect((await memory("stale1")).state).toBe("archived");
    expect((await memory("stale2")).state).toBe("archived");
    expect((await memory("staleStable")).state).toBe("active");
    expect((await memory("staleRead")).state).toBe("active");
    expect(await h.db.dreamAction.count({ where: { runId, actionType: "archive" } })).toBe(2);
  });

  it("sorts unsorted memories into the existing topic and a new named one", async () => {
    expect((await memory("frontUnsorted1")).topicId).toBe(frontendTopic);
    expect((await memory("frontUnsorted2")).topicId).toBe(frontendTopic);
    const k8s = await Promise.all((["k8s1", "k8s2", "k8s3", "k8s4"] as const).map(memory));
    const topicId = k8s[0]!.topicId;
    expect(topicId).not.toBeNull();
    expect(topicId).not.toBe(frontendTopic);
    expect(k8s.filter((m) => m.topicId === topicId).length).toBeGreaterThanOrEqual(3);
    const topic = await h.db.topic.findUniqueOrThrow({ where: { id: topicId! } });
    expect(topic.name).toMatch(/Kubernetes|Pod/);
  });

  it("moves updated_at of the memories it files, as filing through the API does (clients sync by it)", async () => {
    // Seeded 10 days back; the run filed them into topics, so a client syncing by updated_at must see them again.
    for (const key of ["frontUnsorted1", "frontUnsorted2", "k8s1"] as const) {
      const filed = await memory(key);
      expect(filed.topicId).not.toBeNull();
      expect(filed.updatedAt.getTime()).toBeGreaterThan(Date.now() - DAY);
    }
    const list = await owner.get(`/v1/memories?hub_id=${hubId}&limit=100`);
    const listed = list.body.data.memories.find((m: { id: string }) => m.id === ids.frontUnsorted1);
    expect(Date.parse(listed.updated_at)).toBeGreaterThan(Date.now() - DAY);
  });

  it("lists the run with counts and a markdown report, through the API", async () => {
    const list = await owner.get(`/v1/dreams?hub_id=${hubId}`);
    expect(list.status).toBe(200);
    const run = list.body.data.runs[0];
    expect(run).toMatchObject({ id: runId, hub_id: hubId, status: "completed", duplicates_merged: 2, contradictions_found: 1, memories_archived: 2, memories_scanned: Object.keys(PLANTED).length });
    expect(run.memories_organized).toBeGreaterThanOrEqual(5);
    expect(run.report.split("\n")[0]).toMatch(/^Merged 2 near-duplicates, flagged 1 contradiction for review, archived 2 stale memories, organized \d+ memories/);
    expect(run.report).toContain("## Contradictions to review (1)");
    expect(run.phase_metrics.similar).toMatchObject({ candidates: expect.any(Number), duration_ms: expect.any(Number) });
    const report = await owner.get("/v1/dreams/report", { headers: { "x-hub-id": hubId } });
    expect(report.body.data).toMatchObject({ has_run: true, run: { id: runId }, intelligence: { latest_run: { merged: 2, contradictions_found: 1, archived: 2 }, pending_review: { contradictions: 1, total: 1 } } });
    const actions = await owner.get(`/v1/dreams/${runId}/actions?type=merge`);
    expect(actions.body.data.actions).toHaveLength(2);
    const none = await owner.get("/v1/dreams/report");
    expect(none.body.data).toMatchObject({ has_run: false, intelligence: { pending_review: { total: 0 } } });
    const stranger = await h.user("Stranger");
    expect((await stranger.get(`/v1/dreams/${runId}`)).status).toBe(404);
    expect((await stranger.get(`/v1/dreams?hub_id=${hubId}`)).status).toBe(404);
  });

  it("undoes every kind of action, resolves the review, and the next run does not redo what was undone", async () => {
    const merge = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "merge", sourceMemoryIds: { has: ids.dupOld1 } } });
    const undone = await owner.post(`/v1/dreams/actions/${merge.id}/undo`);
    expect(undone.status, undone.text).toBe(200);
    expect(undone.body.data).toMatchObject({ state: "undone", resolution: "undone" });
    expect(await memory("dupOld1")).toMatchObject({ state: "active", supersededBy: null });
    expect((await owner.post(`/v1/dreams/actions/${merge.id}/undo`)).status).toBe(409);

    const archive = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "archive", sourceMemoryIds: { has: ids.stale1 } } });
    expect((await owner.post(`/v1/dreams/actions/${archive.id}/undo`)).status).toBe(200);
    expect((await memory("stale1")).state).toBe("active");

    // Undoing every organize into the new topic removes the topic the run created.
    const k8sTopic = (await memory("k8s1")).topicId!;
    for (const action of await h.db.dreamAction.findMany({ where: { runId, actionType: "organize", toTopicId: k8sTopic } })) {
      expect((await owner.post(`/v1/dreams/actions/${action.id}/undo`)).status).toBe(200);
    }
    expect((await memory("k8s1")).topicId).toBeNull();
    expect(await h.db.topic.findUnique({ where: { id: k8sTopic } })).toBeNull();

    const review = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "contradiction" } });
    expect((await owner.post(`/v1/dreams/actions/${review.id}/undo`)).status).toBe(409);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_a_and_b" })).status).toBe(400);
    const resolved = await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_b" });
    expect(resolved.body.data).toMatchObject({ state: "resolved", resolution: "keep_b" });
    expect(await memory("contraOld")).toMatchObject({ state: "archived", supersededBy: ids.contraNew });
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_a" })).status).toBe(409);
    expect((await owner.post(`/v1/dreams/actions/${review.id}/undo`)).body.data).toMatchObject({ state: "pending_review", resolution: null });
    expect((await memory("contraOld")).state).toBe("active");

    // A second run: the undone merge, archive and organize stay undone; the open review is not flagged twice.
    const second = (await trigger(owner, hubId)).body.data.run_id;
    await runDreamRunOnce(h.db, second);
    const again = await h.db.dreamAction.findMany({ where: { runId: second } });
    expect(again.filter((a) => a.actionType === "merge")).toEqual([]);
    expect(again.filter((a) => a.actionType === "contradiction")).toEqual([]);
    expect(again.filter((a) => a.actionType === "archive" && a.sourceMemoryIds.includes(ids.stale1))).toEqual([]);
    expect(again.filter((a) => a.actionType === "organize" && a.sourceMemoryIds.includes(ids.k8s1))).toEqual([]);
    expect((await memory("dupOld1")).state).toBe("active");
  });
});

describe("contradiction reviews reach the hub's owner and admins as notifications", () => {
  it("each manager gets a review_contradiction; resolving it anywhere closes every copy, undo reopens them", async () => {
    const admin = await h.user("Review admin");
    const contributor = await h.user("Review contributor");
    const hubId = await h.teamHub(owner, [[admin, "admin"], [contributor, "contributor"]]);
    const pairs = [
      ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."],
      ["The maximum upload size for attachments is 10 MB.", "The maximum upload size for attachments is 50 MB."],
    ];
    const ids: string[][] = [];
    const base = Date.now() - 5 * DAY;
    for (const [i, pair] of pairs.entries()) {
      const row: string[] = [];
      for (const [j, content] of pair.entries()) {
        const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
        expect(res.status, res.text).toBe(201);
        const at = new Date(base + (i * 2 + j) * 60_000);
        await backdateMemories(h.db, res.body.data.id, { createdAt: at, updatedAt: at });
        row.push(res.body.data.id);
      }
      ids.push(row);
    }
    await indexMemories(h.db, ids.flat());
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    await runDreamRunOnce(h.db, runId);
    const found = await h.db.dreamAction.findMany({ where: { runId, actionType: "contradiction" } });
    expect(found).toHaveLength(2);
    // reviews[i] is the review of pairs[i] (older memory first).
    const reviews = ids.map((pair) => found.find((r) => r.sourceMemoryIds[0] === pair[0])!);
    expect(reviews.map((r) => r?.sourceMemoryIds)).toEqual(ids);

    const inbox = async (client: Client, query = "&status=pending") => (await client.get(`/v1/notifications?kind=review_contradiction&hub=${hubId}${query}`)).body.data.notifications as any[];
    for (const manager of [owner, admin]) {
      const rows = await inbox(manager);
      expect(rows).toHaveLength(2);
      const first = rows.find((n) => n.source_id === reviews[0]!.id);
      expect(first).toMatchObject({
        kind: "review_contradiction",
        status: "pending",
        hub_id: hubId,
        recipient_user_id: manager.id,
        source_kind: "dream_action",
        dream_run_id: runId,
        payload: { dream_run_id: runId, memory_a: { id: ids[0]![0], title: expect.any(String) }, memory_b: { id: ids[0]![1] }, similarity: expect.any(Number), reason: expect.stringContaining("disagree") },
      });
      const summary = await manager.get(`/v1/notifications/summary?hub=${hubId}`);
      expect(summary.body.data.by_kind.review_contradiction).toEqual({ pending: 2, unseen: 2 });
    }
    expect(await inbox(contributor)).toEqual([]);
    // Each creation was announced to its recipient on the event stream.
    expect(await h.db.event.count({ where: { type: "notification.created", hubId, userIds: { has: admin.id } } })).toBe(2);

    // A review is a decision: not dismissable in bulk or one by one, only resolved.
    const adminFirst = (await inbox(admin)).find((n) => n.source_id === reviews[0]!.id);
    expect((await admin.post(`/v1/notifications/${adminFirst.id}/dismiss`)).status).toBe(400);

    // Resolved through the dream route: both managers' copies close with the resolution.
    const resolved = await owner.post(`/v1/dreams/actions/${reviews[0]!.id}/resolve`, { resolution: "keep_b" });
    expect(resolved.status, resolved.text).toBe(200);
    for (const manager of [owner, admin]) {
      const closed = (await inbox(manager, "&status=resolved")).filter((n) => n.source_id === reviews[0]!.id);
      expect(closed).toEqual([expect.objectContaining({ status: "resolved", resolution: "kept_b", resolved_at: expect.any(String) })]);
      expect((await inbox(manager)).map((n) => n.source_id)).toEqual([reviews[1]!.id]);
    }
    expect((await admin.post(`/v1/notifications/${adminFirst.id}/resolve`, { action: "keep_a" })).status).toBe(409);

    // Undo reopens the review and every copy.
    expect((await owner.post(`/v1/dreams/actions/${reviews[0]!.id}/undo`)).status).toBe(200);
    for (const manager of [owner, admin]) expect((await inbox(manager)).map((n) => n.source_id).sort()).toEqual([reviews[0]!.id, reviews[1]!.id].sort());

    // Resolved through the notification: the dream action is decided the same way (keep A archives B).
    const second = (await inbox(admin)).find((n) => n.source_id === reviews[1]!.id);
    expect((await admin.post(`/v1/notifications/${second.id}/resolve`, { action: "merge" })).status).toBe(400);
    const viaInbox = await admin.post(`/v1/notifications/${second.id}/resolve`, { action: "keep_a" });
    expect(viaInbox.status, viaInbox.text).toBe(200);
    expect(viaInbox.body.data).toMatchObject({ status: "resolved", resolution: "kept_a" });
    expect(await h.db.dreamAction.findUniqueOrThrow({ where: { id: reviews[1]!.id } })).toMatchObject({ state: "resolved", resolution: "keep_a", resolvedBy: admin.id });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: ids[1]![1]! } })).toMatchObject({ state: "archived", supersededBy: ids[1]![0] });
    expect((await inbox(owner, "&status=resolved")).find((n) => n.source_id === reviews[1]!.id)).toMatchObject({ resolution: "kept_a" });

    // Dismissing a copy closes only that one; the review stays open for the other manager and in the dream.
    await owner.post(`/v1/dreams/actions/${reviews[1]!.id}/undo`);
    const ownerCopy = (await inbox(owner)).find((n) => n.source_id === reviews[1]!.id);
    expect((await owner.post(`/v1/notifications/${ownerCopy.id}/resolve`, { action: "dismiss" })).body.data).toMatchObject({ resolution: "dismissed" });
    expect((await inbox(admin)).map((n) => n.source_id)).toContain(reviews[1]!.id);
    expect((await h.db.dreamAction.findUniqueOrThrow({ where: { id: reviews[1]!.id } })).state).toBe("pending_review");
  }, 180_000);
});

describe("runs: one at a time, permissions, crash and resume, time budget", () => {
  it("two concurrent triggers make one run", async () => {
    const hubId = await h.teamHub(owner);
    const [a, b] = await Promise.all([trigger(owner, hubId), trigger(owner, hubId)]);
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(new Set([a.body.data.run_id, b.body.data.run_id]).size).toBe(1);
    expect([a.body.data.status, b.body.data.status].sort()).toEqual(["already_running", "queued"]);
    expect(await h.db.dreamRun.count({ where: { hubId } })).toBe(1);
    // Two workers race for it: one runs it.
    const results = await Promise.all([runDreamRunOnce(h.db, a.body.data.run_id, { owner: "w1" }), runDreamRunOnce(h.db, a.body.data.run_id, { owner: "w2" })]);
    expect(results.filter(Boolean)).toHaveLength(1);
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: a.body.data.run_id } })).status).toBe("completed");
    // Finished: the next trigger starts a new run.
    expect((await trigger(owner, hubId)).body.data.status).toBe("queued");
  });

  it("GET /v1/usage/dreams: this month's runs of the hub, unlimited, and whether the caller may trigger", async () => {
    const viewer = await h.user("Quota viewer");
    const hubId = await h.teamHub(owner, [[viewer, "viewer"]]);
    const empty = await owner.get(`/v1/usage/dreams?hub_id=${hubId}`);
    expect(empty.status, empty.text).toBe(200);
    expect(empty.body.data).toMatchObject({ scope: "hub", hub_id: hubId, tier: "lucid", mode: "soft", limit: -1, used: 0, allowed: true, quota_source: "self_hosted" });
    expect(empty.body.data).not.toHaveProperty("remaining");
    expect(new Date(empty.body.data.period_start).getUTCDate()).toBe(1);
    expect(new Date(empty.body.data.period_end) > new Date()).toBe(true);
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    await runDreamRunOnce(h.db, runId);
    await trigger(owner, hubId);
    // A run of an earlier month does not count.
    await h.db.dreamRun.update({ where: { id: runId }, data: { createdAt: new Date(Date.now() - 40 * DAY) } });
    expect((await owner.get("/v1/usage/dreams", { headers: { "x-hub-id": hubId } })).body.data.used).toBe(1);
    expect((await viewer.get(`/v1/usage/dreams?hub_id=${hubId}`)).body.data).toMatchObject({ used: 1, allowed: false });
    expect((await viewer.get("/v1/usage/dreams")).body.data).toMatchObject({ scope: "personal", used: 0, allowed: true });
    expect((await viewer.get("/v1/usage/dreams")).body.data).not.toHaveProperty("hub_id");
    const stranger = await h.user("Quota stranger");
    expect((await stranger.get(`/v1/usage/dreams?hub_id=${hubId}`)).status).toBe(404);
  });

  it("follows the roles table: owner and admin, contributors only when the hub allows it", async () => {
    const admin = await h.user("Admin");
    const contributor = await h.user("Contrib");
    const viewer = await h.user("Viewer");
    const outsider = await h.user("Outsider");
    const hubId = await h.teamHub(owner, [[admin, "admin"], [contributor, "contributor"], [viewer, "viewer"]]);
    expect((await trigger(contributor, hubId)).status).toBe(403);
    expect((await trigger(viewer, hubId)).status).toBe(403);
    expect((await trigger(outsider, hubId)).status).toBe(404);
    expect((await trigger(admin, hubId)).status).toBe(202);
    await h.db.dreamRun.deleteMany({ where: { hubId } });
    await h.db.hub.update({ where: { id: hubId }, data: { allowContributorDreams: true } });
    expect((await trigger(contributor, hubId)).status).toBe(202);
    // Personal hub by default.
    expect((await contributor.post("/v1/dreams/trigger")).status).toBe(202);
    expect((await viewer.get(`/v1/dreams?hub_id=${hubId}`)).body.data.runs).toHaveLength(1);
  });

  it("a run that crashes mid-phase resumes where it stopped and ends like an uninterrupted run", async () => {
    const clean = await seedHub();
    const crashed = await seedHub();
    const config = dreamConfig({ batchSize: 1 });
    const cleanRun = (await trigger(owner, clean.hubId)).body.data.run_id;
    await runDreamRunOnce(h.db, cleanRun, { config });

    const runId = (await trigger(owner, crashed.hubId)).body.data.run_id;
    expect(await claimDreamRun(h.db, runId, "doomed", new Date(), config.staleRunMs)).toBe(true);
    let batches = 0;
    const crash = new Error("simulated crash");
    await expect(
      executeDreamRun(
        {
          db: h.db,
          sql: h.database.sql,
          config,
          afterBatch: () => {
            if (++batches === 2) throw crash;
          },
        },
        runId,
        "doomed",
      ),
    ).rejects.toBe(crash);
    const dead = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
    expect(dead).toMatchObject({ status: "running", phase: "similar", leaseOwner: "doomed" });
    expect(await h.db.dreamAction.count({ where: { runId } })).toBe(2);
    // Another worker cannot take it while the heartbeat is fresh…
    expect(await claimDreamRun(h.db, runId, "rescuer", new Date(), 60_000)).toBe(false);
    // …and takes it once the heartbeat is stale; the dead worker's lease is gone.
    expect(await claimDreamRun(h.db, runId, "rescuer", new Date(Date.now() + 120_000), 60_000)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, runId, "rescuer")).toBe("completed");
    const count = async (id: string) => {
      const rows = await h.db.dreamAction.groupBy({ by: ["actionType"], where: { runId: id }, _count: { _all: true } });
      return Object.fromEntries(rows.map((r) => [r.actionType, r._count._all]));
    };
    expect(await count(runId)).toEqual(await count(cleanRun));
    const resumed = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
    expect(resumed).toMatchObject({ status: "completed", phase: "done", attempts: 2 });
    // No memory was acted on twice.
    const merges = await h.db.dreamAction.findMany({ where: { runId, actionType: { in: ["merge", "organize", "archive"] } } });
    const acted = merges.flatMap((m) => (m.actionType === "merge" ? [m.sourceMemoryIds[0]!] : m.sourceMemoryIds).map((id) => `${m.actionType}:${id}`));
    expect(new Set(acted).size).toBe(acted.length);
  }, 180_000);

  it("a hub marked deleted: its queued run is neither picked up nor claimed, and a running one stops at its next batch", async () => {
    // Marked deleted, its memories not purged yet (a large hub, or a process stopped mid-purge).
    const markDeleted = (hubId: string) => h.db.hub.update({ where: { id: hubId }, data: { deletedAt: new Date() } });
    const config = dreamConfig({ batchSize: 1 });
    const queued = await seedHub();
    const queuedRun = (await trigger(owner, queued.hubId)).body.data.run_id;
    await markDeleted(queued.hubId);
    expect((await pendingDreamRuns(h.db, new Date(), 0)).map((run) => run.id)).not.toContain(queuedRun);
    expect(await claimDreamRun(h.db, queuedRun, "worker", new Date(), config.staleRunMs)).toBe(false);

    const running = await seedHub();
    const runId = (await trigger(owner, running.hubId)).body.data.run_id;
    expect(await claimDreamRun(h.db, runId, "worker", new Date(), config.staleRunMs)).toBe(true);
    const afterBatch = async (_phase: string, batch: number) => {
      if (batch === 1) await markDeleted(running.hubId);
    };
    await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, runId, "worker")).rejects.toBeInstanceOf(LostLeaseError);
    expect(await h.db.dreamAction.count({ where: { runId } })).toBe(1);
  });

  it("a run out of time stops cleanly as partial_failed", async () => {
    const { hubId } = await seedHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    await runDreamRunOnce(h.db, runId, { config: dreamConfig({ maxRunMs: 0 }) });
    const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
    expect(run).toMatchObject({ status: "partial_failed", error: expect.stringMatching(/budget/) });
    expect(run.report).toMatch(/time budget/);
  }, 120_000);
});

describe("schedule and Inngest functions (@inngest/test)", () => {
  it("due hubs are those written to since their last run and not run within the interval", async () => {
    const hubId = await h.teamHub(owner);
    await owner.post("/v1/memories", { content: "Scheduled dreams need a write first." }, { headers: { "x-hub-id": hubId } });
    expect(await dueHubs(h.db, new Date(), 24, 10_000)).toContain(hubId);
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    expect(await dueHubs(h.db, new Date(), 24, 10_000)).not.toContain(hubId);
    await runDreamRunOnce(h.db, runId);
    // A day later with no new writes: still not due.
    expect(await dueHubs(h.db, new Date(Date.now() + 2 * DAY), 24, 10_000)).not.toContain(hubId);
  });

  it("announces each memory the run files into a topic with a memory.updated, as a topic's endpoint does", async () => {
    // The run's filing moves topic_id and updated_at, yet sent no event: a client keeping its list (or
    // its topic tree) by the event stream, or a webhook, never heard of it.
    const { hubId } = await seedHub();
    const since = new Date();
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    await runDreamRunOnce(h.db, runId);
    const filed = (await h.db.dreamAction.findMany({ where: { runId, actionType: "organize" }, select: { resultMemoryId: true } })).map((a) => a.resultMemoryId!);
    expect(filed.length).toBeGreaterThan(0);
    const events = await h.db.event.findMany({ where: { hubId, type: "memory.updated", createdAt: { gte: since } }, select: { entityId: true, actorId: true } });
    const announced = new Set(events.map((e) => e.entityId));
    expect(filed.filter((id) => !announced.has(id))).toEqual([]);
    expect(events.every((e) => e.actorId === null)).toBe(true);
  }, 120_000);

  it("a run's own filing of memories into topics is not a write: the hub is due again only after a member's", async () => {
    // The organize step moves updated_at (clients sync by it), and dueHubs took that for a member's
    // write: every run that filed anything queued another a day later.
    const { hubId } = await seedHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    await runDreamRunOnce(h.db, runId);
    const filed = await h.db.dreamAction.findMany({ where: { runId, actionType: "organize" }, select: { resultMemoryId: true } });
    expect(filed.length).toBeGreaterThan(0);
    const later = () => new Date(Date.now() + 2 * DAY);
    expect(await dueHubs(h.db, later(), 24, 10_000)).not.toContain(hubId);
    const edited = await owner.patch(`/v1/memories/${filed[0]!.resultMemoryId}`, { content: "Edited by a member after the dream filed it." });
    expect(edited.status, edited.text).toBe(200);
    expect(await dueHubs(h.db, later(), 24, 10_000)).toContain(hubId);
  }, 120_000);

  it("a run's filing of a memory last written ahead of the run's clock is not a write either", async () => {
    // Written just before the clock stepped back (or in the filing's own millisecond): the forward
    // trigger moves the filing's updated_at past the stored one, not to the run's clock. dueHubs
    // matched the action's time to it exactly and took the filing for a member's write.
    const { hubId, ids } = await seedHub();
    const ahead = new Date(Date.now() + 60_000);
    await backdateMemories(h.db, ids.frontUnsorted1, { updatedAt: ahead });
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    await runDreamRunOnce(h.db, runId);
    const filed = await h.db.memory.findUniqueOrThrow({ where: { id: ids.frontUnsorted1 } });
    expect(filed.topicId).not.toBeNull();
    expect(filed.updatedAt.getTime()).toBe(ahead.getTime() + 1);
    const later = () => new Date(Date.now() + 2 * DAY);
    expect(await dueHubs(h.db, later(), 24, 10_000)).not.toContain(hubId);
    const action = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "organize", resultMemoryId: ids.frontUnsorted1 } });
    expect(action.createdAt).toEqual(filed.updatedAt);
    const edited = await owner.patch(`/v1/memories/${ids.frontUnsorted1}`, { content: "Edited by a member after the dream filed it." });
    expect(edited.status, edited.text).toBe(200);
    expect(await dueHubs(h.db, later(), 24, 10_000)).toContain(hubId);
  }, 120_000);

  it("dream-run runs claim, each phase and finish as steps; dream-schedule queues due hubs", async () => {
    const { hubId } = await seedHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    const { result, ctx } = await new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] }).execute();
    expect(result).toEqual({ status: "completed" });
    for (const name of ["claim", "phase-similar", "phase-stale", "phase-organize", "finish"]) expect(ctx.step.run).toHaveBeenCalledWith(name, expect.any(Function));
    expect(await h.db.dreamAction.count({ where: { runId, actionType: "merge" } })).toBe(2);
    const again = await new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] }).execute();
    expect(again.result).toEqual({ status: "skipped" });

    const fresh = await h.teamHub(owner);
    await owner.post("/v1/memories", { content: "A hub the schedule should pick up." }, { headers: { "x-hub-id": fresh } });
    // Sending reaches Inngest Cloud, so that one step is mocked with the official test tool.
    const scheduled = await new InngestTestEngine({ function: dreamScheduleFunction, steps: [{ id: "run", handler: () => ({ ids: ["evt-1"] }) }] }).execute();
    expect((scheduled.result as { queued: number }).queued).toBeGreaterThanOrEqual(1);
    const queued = await h.db.dreamRun.findFirstOrThrow({ where: { hubId: fresh } });
    expect(queued).toMatchObject({ status: "queued", triggeredBy: null });
    expect(scheduled.ctx.step.sendEvent).toHaveBeenCalledWith("run", expect.arrayContaining([{ name: DREAM_RUN_EVENT, data: { hub_id: fresh, run_id: queued.id } }]));
  }, 180_000);
});

describe("the dream-run function's lease and time budget (@inngest/test)", () => {
  const smallHub = async () => {
    const hubId = await h.teamHub(owner);
    const ids = [];
    for (const content of [PLANTED.dupOld1, PLANTED.dupNew1, PLANTED.staging]) ids.push((await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string);
    await indexMemories(h.db, ids);
    return hubId;
  };

  it("a re-sent run's second function run does not hold the lease the first one holds: it is skipped", async () => {
    const hubId = await smallHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    const event = { name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } };
    // The first function run has claimed the run and is working on it (its heartbeat is fresh).
    await new InngestTestEngine({ function: dreamRunFunction, events: [event] }).executeStep("claim");
    const first = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
    expect(first).toMatchObject({ status: "running", attempts: 1 });
    const second = await new InngestTestEngine({ function: dreamRunFunction, events: [event] }).execute();
    expect(second.result).toEqual({ status: "skipped" });
    expect(await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "running", leaseOwner: first.leaseOwner, attempts: 1 });
    expect(await h.db.dreamAction.count({ where: { runId } })).toBe(0);
  }, 120_000);

  it("a function run that claimed before a deploy replays its claim as `true`: it claims again and finishes the run", async () => {
    const hubId = await smallHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    // As the claim step returned before it named its owner: a boolean, the lease held under the dream run's id.
    expect(await claimDreamRun(h.db, runId, `inngest-${runId}`, new Date(), dreamConfig().staleRunMs)).toBe(true);
    const event = { name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } };
    const { result, error } = await new InngestTestEngine({ function: dreamRunFunction, events: [event] }).execute({ steps: [{ id: "claim", handler: () => true }] });
    expect(error).toBeUndefined();
    expect(result).toEqual({ status: "completed" });
    const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
    expect(run.status).toBe("completed");
    expect(run.leaseOwner).not.toBe(`inngest-${runId}`);
    expect(await h.db.dreamAction.count({ where: { runId, actionType: "merge" } })).toBe(1);
  }, 120_000);

  it("the budget runs from the claim, not from each step: a run past it ends partial_failed", async () => {
    const hubId = await smallHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    const engine = new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] });
    const saved = process.env.ENGRAM_DREAM_MAX_SECONDS;
    process.env.ENGRAM_DREAM_MAX_SECONDS = "1";
    try {
      const claimed = await engine.executeStep("claim");
      // Inngest calls the function again for each step, with the claim's memoized output; the phases come after the budget.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      const { result } = await engine.execute({ steps: [{ id: "claim", handler: () => claimed.result }] });
      expect(result).toEqual({ status: "partial_failed" });
    } finally {
      if (saved === undefined) delete process.env.ENGRAM_DREAM_MAX_SECONDS;
      else process.env.ENGRAM_DREAM_MAX_SECONDS = saved;
    }
    const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
    expect(run).toMatchObject({ status: "partial_failed", error: expect.stringMatching(/budget/) });
    expect(run.report).toMatch(/time budget/);
  }, 120_000);
});

describe("the dream-run function when its hub is purged mid-run (@inngest/test)", () => {
  /**
   * A purge's cascade takes the run's row. The in-process worker stops such a run quietly (a lost
   * lease), but each Inngest phase step read the row with findUniqueOrThrow and the finish step let the
   * LostLeaseError through: the step threw, was retried, and the function run failed.
   */
  const purgedAfter = async (stepId: string) => {
    const hubId = await h.teamHub(owner);
    const ids = [];
    for (const content of [PLANTED.dupOld1, PLANTED.dupNew1, PLANTED.staging]) ids.push((await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string);
    await indexMemories(h.db, ids);
    const runId = (await trigger(owner, hubId)).body.data.run_id;
    const engine = new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] });
    const claimed = await engine.executeStep("claim");
    const steps = [{ id: "claim", handler: () => claimed.result }];
    for (const phase of ["phase-similar", "phase-stale", "phase-organize"]) {
      // Inngest replays each step it has run with its memoized output.
      const done = await engine.executeStep(phase, { steps: [...steps] });
      steps.push({ id: phase, handler: () => done.result });
      if (phase === stepId) break;
    }
    await h.db.hub.delete({ where: { id: hubId } });
    expect(await h.db.dreamRun.count({ where: { id: runId } })).toBe(0);
    return engine.execute({ steps });
  };

  it("purged between two phases: the next phase step ends the function quietly", async () => {
    const { result, error } = await purgedAfter("phase-similar");
    expect(error).toBeUndefined();
    expect(result).toEqual({ status: "lost" });
  }, 120_000);

  it("purged before the finish step: it ends the function quietly", async () => {
    const { result, error } = await purgedAfter("phase-organize");
    expect(error).toBeUndefined();
    expect(result).toEqual({ status: "lost" });
  }, 120_000);
});

describe("organizing around archived topics", () => {
  it("files no memory into an archived topic, even one whose memories it resembles", async () => {
    const hubId = await h.teamHub(owner);
    const ids: Record<string, string> = {};
    for (const key of ["front1", "front2", "front3", "frontUnsorted1", "frontUnsorted2"] as const) {
      ids[key] = (await owner.post("/v1/memories", { content: PLANTED[key] }, { headers: { "x-hub-id": hubId } })).body.data.id;
    }
    const topic = (await owner.post("/v1/topics", { name: "Frontend", hub_id: hubId })).body.data.id as string;
    for (const key of ["front1", "front2", "front3"]) await h.db.memory.update({ where: { id: ids[key] }, data: { topicId: topic } });
    await indexMemories(h.db, Object.values(ids));
    expect((await owner.post(`/v1/topics/${topic}/archive`, {})).status).toBe(200);
    const res = await trigger(owner, hubId);
    expect(res.status, res.text).toBe(202);
    expect(await runDreamRunOnce(h.db, res.body.data.run_id)).toBe(true);
    for (const key of ["frontUnsorted1", "frontUnsorted2"]) {
      const m = await h.db.memory.findUniqueOrThrow({ where: { id: ids[key] }, include: { topic: true } });
      expect(m.topic?.archivedAt ?? null, key).toBeNull();
    }
  }, 120_000);
});

describe("resolving a review whose memory to keep is gone", () => {
  it("keep_a after A was deleted (or keep_b after B was archived) is a 409 and leaves the other side active", async () => {
    const hubId = await h.teamHub(owner);
    const push = async (content: string) => (await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const review = async (a: string, b: string) => {
      const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
      return h.db.dreamAction.create({
        data: { id: newId(), runId: run.id, hubId, actionType: "contradiction", state: "pending_review", sourceMemoryIds: [a, b], reason: "they disagree", details: {} },
      });
    };
    const a = await push("The API request timeout is 30 seconds.");
    const b = await push("The API request timeout is 60 seconds.");
    const first = await review(a, b);
    expect((await owner.delete(`/v1/memories/${a}`)).status).toBe(200);
    const refused = await owner.post(`/v1/dreams/actions/${first.id}/resolve`, { resolution: "keep_a" });
    expect([refused.status, refused.body.error?.code]).toEqual([409, "conflict"]);
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: b } })).toMatchObject({ state: "active", supersededBy: null });
    // The delete closed the review: with A gone there is nothing left to decide (nor to restore).
    expect(await h.db.dreamAction.findUniqueOrThrow({ where: { id: first.id } })).toMatchObject({ state: "resolved", resolution: "memory_deleted" });
    expect((await owner.post(`/v1/dreams/actions/${first.id}/resolve`, { resolution: "keep_both" })).status).toBe(409);

    const c = await push("The maximum upload size is 10 MB.");
    const d = await push("The maximum upload size is 50 MB.");
    const second = await review(c, d);
    await h.db.memory.update({ where: { id: d }, data: { state: "archived" } });
    expect((await owner.post(`/v1/dreams/actions/${second.id}/resolve`, { resolution: "keep_b" })).status).toBe(409);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: c } })).state).toBe("active");
    const kept = await owner.post(`/v1/dreams/actions/${second.id}/resolve`, { resolution: "keep_a" });
    expect(kept.status, kept.text).toBe(200);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: c } })).state).toBe("active");
  });
});

describe("undoing an action twice at once", () => {
  it("one undo applies, the other is a 409 (an organize, and a decided review)", async () => {
    const hubId = await h.teamHub(owner);
    const push = async (content: string) => (await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const sorted = await push("Kubernetes pods are autoscaled on CPU.");
    const topic = (await owner.post("/v1/topics", { name: "Kubernetes", hub_id: hubId })).body.data.id as string;
    await h.db.memory.update({ where: { id: sorted }, data: { topicId: topic } });
    const organize = await h.db.dreamAction.create({
      data: { id: newId(), runId: run.id, hubId, actionType: "organize", state: "applied", sourceMemoryIds: [sorted], resultMemoryId: sorted, toTopicId: topic, reason: "sorted" },
    });
    const a = await push("The API request timeout is 30 seconds.");
    const b = await push("The API request timeout is 60 seconds.");
    const review = await h.db.dreamAction.create({
      data: { id: newId(), runId: run.id, hubId, actionType: "contradiction", state: "pending_review", sourceMemoryIds: [a, b], reason: "they disagree" },
    });
    expect((await owner.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_a" })).status).toBe(200);
    for (const action of [organize, review]) {
      const results = await Promise.all([owner.post(`/v1/dreams/actions/${action.id}/undo`), owner.post(`/v1/dreams/actions/${action.id}/undo`)]);
      expect(results.map((r) => r.status).sort(), action.actionType).toEqual([200, 409]);
    }
    expect(await h.db.dreamAction.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ state: "pending_review", resolution: null });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: b } })).state).toBe("active");
  });
});

describe("a member demoted or removed between the role check and the write", () => {
  it("undoes and resolves nothing: a demoted admin is 403, a removed one 404, the action and memories as they were", async () => {
    const adm = await h.user("Demoted admin");
    const hubId = await h.teamHub(owner, [[adm, "admin"]]);
    const push = async (content: string) => (await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const archived = await push("Temporary note: the office wifi password changes next week.");
    await h.db.memory.update({ where: { id: archived }, data: { state: "archived" } });
    const archive = await h.db.dreamAction.create({ data: { id: newId(), runId: run.id, hubId, actionType: "archive", state: "applied", sourceMemoryIds: [archived], reason: "stale" } });
    const a = await push("The API request timeout is 30 seconds.");
    const b = await push("The API request timeout is 60 seconds.");
    const review = await h.db.dreamAction.create({ data: { id: newId(), runId: run.id, hubId, actionType: "contradiction", state: "pending_review", sourceMemoryIds: [a, b], reason: "they disagree" } });
    // The role is read (and allows it) first; the change commits as the write's transaction begins — as
    // another request's demotion or removal would between the two.
    const callerAs = (change: () => Promise<unknown>) => sessionContext(h, adm, changedBefore(h.db, ["$transaction"], change));
    const demote = () => h.db.hubMember.update({ where: { hubId_userId: { hubId, userId: adm.id } }, data: { role: "viewer" } });
    const promote = () => h.db.hubMember.update({ where: { hubId_userId: { hubId, userId: adm.id } }, data: { role: "admin" } });
    const remove = () => h.db.hubMember.delete({ where: { hubId_userId: { hubId, userId: adm.id } } });

    await expect(undoDreamAction(callerAs(demote), archive.id)).rejects.toMatchObject({ code: "forbidden" });
    await promote();
    await expect(resolveDreamAction(callerAs(demote), review.id, "keep_a")).rejects.toMatchObject({ code: "forbidden" });
    await promote();
    await expect(resolveDreamAction(callerAs(remove), review.id, "keep_b")).rejects.toMatchObject({ code: "not_found", message: "Dream action not found" });
    expect(await h.db.dreamAction.findUniqueOrThrow({ where: { id: archive.id } })).toMatchObject({ state: "applied" });
    expect(await h.db.dreamAction.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ state: "pending_review", resolution: null });
    expect((await h.db.memory.findMany({ where: { id: { in: [archived, a, b] } }, orderBy: { id: "asc" } })).map((m) => [m.id, m.state])).toEqual(
      [
        [archived, "archived"],
        [a, "active"],
        [b, "active"],
      ].sort((x, y) => (x[0]! < y[0]! ? -1 : 1)),
    );
  });
});

describe("a trigger by a member demoted or removed after the route's role check", () => {
  it("queues no run: 403 for a member now a viewer, 404 for one removed", async () => {
    const adm = await h.user("Demoted trigger");
    const hubId = await h.teamHub(owner, [[adm, "admin"]]);
    const hub = await h.db.hub.findUniqueOrThrow({ where: { id: hubId } });
    // The wrapper read the role (admin: allowed); the change commits as the trigger reaches the database.
    const callerAs = (change: () => Promise<unknown>): HubContext =>
      ({ ...sessionContext(h, adm, changedBefore(h.db, ["$transaction", "dreamRun.*"], change)), hub, role: "admin" }) as unknown as HubContext;
    const member = { hubId_userId: { hubId, userId: adm.id } };
    await expect(triggerDream(callerAs(() => h.db.hubMember.update({ where: member, data: { role: "viewer" } })))).rejects.toMatchObject({ code: "forbidden" });
    await h.db.hubMember.update({ where: member, data: { role: "admin" } });
    await expect(triggerDream(callerAs(() => h.db.hubMember.delete({ where: member })))).rejects.toMatchObject({ code: "not_found" });
    expect(await h.db.dreamRun.count({ where: { hubId } })).toBe(0);
  });
});

describe("undoing the organize that emptied a dream's topic while a memory is filed there", () => {
  /**
   * The undo deleted the dream's topic once it held no memory, without the hub's topic lock a filing
   * holds: a filing that had found the topic and was about to write saw it deleted under it (the
   * foreign key refused its write, and a filing into a topic that had been there answered 404).
   */
  it.skipIf(!testPostgres())("the filing lands and the topic stays; the undo still takes its own memory out", async () => {
    const hubId = await h.teamHub(owner);
    const push = async (content: string) => (await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const sorted = await push("Kubernetes pods are autoscaled on CPU.");
    const loose = await push("Kubernetes pod logs are shipped to Loki.");
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const topic = await h.db.topic.create({ data: { id: newId(), hubId, name: "Kubernetes", createdBy: null } });
    await h.db.memory.update({ where: { id: sorted }, data: { topicId: topic.id } });
    const organize = await h.db.dreamAction.create({
      data: { id: newId(), runId: run.id, hubId, actionType: "organize", state: "applied", sourceMemoryIds: [sorted], resultMemoryId: sorted, toTopicId: topic.id, createdTopic: true, reason: "grouped" },
    });
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    // From pg_locks alone: pg_stat_activity is a snapshot kept for the side's whole transaction. The
    // filing waits for the side; an undo that waits, waits for the filing.
    const waits = async () =>
      (
        await side.query(`WITH f AS (SELECT DISTINCT l.pid FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid)))
          SELECT (SELECT count(*) FROM f)::int AS filing, (SELECT count(*) FROM pg_locks l WHERE NOT l.granted AND pg_blocking_pids(l.pid) && ARRAY(SELECT pid FROM f))::int AS undo`)
      ).rows[0] as { filing: number; undo: number };
    let filing: Promise<{ status: number; text: string }> | undefined;
    let undo: Promise<{ status: number; text: string }> | undefined;
    try {
      // The filing has found the topic and waits to write its memory (held here, as a slow write would).
      await side.query("BEGIN");
      await side.query("SELECT 1 FROM memories WHERE id = $1 FOR UPDATE", [loose]);
      filing = owner.post(`/v1/topics/${topic.id}/memories`, { memory_id: loose });
      for (let waited = 0; (await waits()).filing < 1; waited += 20) {
        if (waited > 20_000) throw new Error("the filing never waited for its memory");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      let settled = false;
      undo = owner.post(`/v1/dreams/actions/${organize.id}/undo`).finally(() => (settled = true));
      // Either the undo is done (it did not wait for the filing) or it waits for the topic lock the filing holds.
      for (let waited = 0; !settled && (await waits()).undo < 1; waited += 20) {
        if (waited > 20_000) throw new Error("the undo neither finished nor waited");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    const [filed, undone] = await Promise.all([filing!, undo!]);
    expect([filed.status, undone.status], `${filed.text} ${undone.text}`).toEqual([200, 200]);
    expect(await h.db.topic.findUnique({ where: { id: topic.id } })).not.toBeNull();
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: loose } })).topicId).toBe(topic.id);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: sorted } })).topicId).toBeNull();
  });
});

describe("a run filing into a dream's topic while an undo empties and deletes it", () => {
  /**
   * The organize batch took the hub's topic lock only to create topics, not to file into one: an undo
   * that emptied a dream's topic deleted it while the batch's filing, which had found it, was writing;
   * the foreign key refused the write once the undo committed, and the whole run ended failed.
   */
  it.skipIf(!testPostgres())("the run waits for the undo, files nothing into the deleted topic and completes", async () => {
    const hubId = await h.teamHub(owner);
    const push = async (content: string) => (await owner.post("/v1/memories", { content, stability: "stable" }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const sorted = await push(PLANTED.k8s1);
    const loose = await push(PLANTED.k8s2);
    await indexMemories(h.db, [sorted, loose]);
    const old = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done", createdAt: new Date(Date.now() - DAY) } });
    const topic = await h.db.topic.create({ data: { id: newId(), hubId, name: "Kubernetes", createdBy: null } });
    await h.db.memory.update({ where: { id: sorted }, data: { topicId: topic.id } });
    const organize = await h.db.dreamAction.create({
      data: { id: newId(), runId: old.id, hubId, actionType: "organize", state: "applied", sourceMemoryIds: [sorted], resultMemoryId: sorted, toTopicId: topic.id, createdTopic: true, reason: "grouped" },
    });
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    // The undo waits on the side (its event, after it deleted the topic); the run, on the undo.
    const waits = async () =>
      (
        await side.query(`WITH f AS (SELECT DISTINCT l.pid FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid)))
          SELECT (SELECT count(*) FROM f)::int AS undo, (SELECT count(*) FROM pg_locks l WHERE NOT l.granted AND pg_blocking_pids(l.pid) && ARRAY(SELECT pid FROM f))::int AS run`)
      ).rows[0] as { undo: number; run: number };
    let undo: Promise<{ status: number; text: string }> | undefined;
    let dream: Promise<boolean> | undefined;
    try {
      await side.query("BEGIN");
      await side.query("SELECT pg_advisory_xact_lock($1::bigint)", [0x656e6772]);
      undo = owner.post(`/v1/dreams/actions/${organize.id}/undo`);
      for (let waited = 0; (await waits()).undo < 1; waited += 20) {
        if (waited > 20_000) throw new Error("the undo never waited");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      dream = runDreamRunOnce(h.db, runId);
      for (let waited = 0; (await waits()).run < 1; waited += 20) {
        if (waited > 30_000) throw new Error("the run never waited for the undo");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      expect((await undo!).status).toBe(200);
      expect(await dream!).toBe(true);
    } finally {
      logged.mockRestore();
    }
    expect(await h.db.topic.findUnique({ where: { id: topic.id } })).toBeNull();
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).status).toBe("completed");
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: loose } })).topicId).toBeNull();
  }, 120_000);
});

describe("a dream batch against the deletion of its hub", () => {
  /**
   * A batch took its run's row (the heartbeat), then its memories; a hub delete took the hub's
   * memories, then (by the cascade) the run's row: opposite orders, so PostgreSQL broke the cycle by
   * failing one of them (a 503 for the delete, or a failed run). Here the delete holds the memories
   * while it waits for the hub's row (held by a stalled transaction), and the batch starts then.
   */
  it.skipIf(!testPostgres())("the delete answers 200 and the run stops quietly, its lease gone with the hub", async () => {
    const { hubId } = await seedHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    const waits = async () =>
      (
        await side.query(`WITH d AS (SELECT DISTINCT l.pid FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid)))
          SELECT (SELECT count(*) FROM d)::int AS deletion, (SELECT count(*) FROM pg_locks l WHERE NOT l.granted AND pg_blocking_pids(l.pid) && ARRAY(SELECT pid FROM d))::int AS dream`)
      ).rows[0] as { deletion: number; dream: number };
    let deletion: Promise<{ status: number; text: string }> | undefined;
    let dream: Promise<boolean> | undefined;
    try {
      await side.query("BEGIN");
      await side.query("SELECT 1 FROM hubs WHERE id = $1 FOR UPDATE", [hubId]);
      deletion = owner.delete(`/v1/hubs/${hubId}`);
      for (let waited = 0; (await waits()).deletion < 1; waited += 20) {
        if (waited > 20_000) throw new Error("the delete never waited for the hub's row");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      let settled = false;
      dream = runDreamRunOnce(h.db, runId, { config: dreamConfig({ batchSize: 1 }) }).finally(() => (settled = true));
      for (let waited = 0; !settled && (await waits()).dream < 1; waited += 20) {
        if (waited > 60_000) throw new Error("the dream neither finished nor waited for the delete");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    const [deleted, ran] = await Promise.all([deletion!, dream!]);
    expect(deleted.status, deleted.text).toBe(200);
    // false: the run was gone when its batch could write (a run that failed on an error answers true).
    expect(ran).toBe(false);
    expect(await h.db.hub.count({ where: { id: hubId } })).toBe(0);
  }, 120_000);
});

describe("what a run reads of very long memories", () => {
  /**
   * A run read each memory's whole content (up to 3 MB each, every memory of the hub) to use its
   * first 4000 characters, and both sides' whole contents of each contradiction for a 280-character
   * excerpt. It now reads only those prefixes; what it finds is the same.
   */
  it("reads at most the first 4000 characters of a memory, and finds the same actions", async () => {
    const { hubId, ids } = await seedHub();
    const padding = " zyxwv".repeat(40_000);
    const long = (await owner.post("/v1/memories", { content: `Release checklist for the mobile app.${padding}` }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    await indexMemories(h.db, [long]);
    // Past the part the checks read, and after its embedding: the pair is found as before.
    await h.db.memory.update({ where: { id: ids.contraNew }, data: { content: PLANTED.contraNew + padding } });
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const seen: unknown[] = [];
    expect(await runDreamRunOnce(readSpy(h.db, seen), runId)).toBe(true);
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).status).toBe("completed");
    expect(longestWith(seen, "zyxwv")).toBeGreaterThan(0);
    expect(longestWith(seen, "zyxwv")).toBeLessThanOrEqual(4000);
    const contradiction = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "contradiction" } });
    expect(contradiction.sourceMemoryIds).toEqual([ids.contraOld, ids.contraNew]);
    const b = (contradiction.details as { b: { excerpt: string } }).b;
    expect(b.excerpt).toBe(`${(PLANTED.contraNew + padding).slice(0, 277)}…`);
  }, 120_000);
});

describe("reopening a review whose archived side has moved to another hub", () => {
  /**
   * Undoing a keep_a / keep_b brought the archived side back by its id alone: once its owner had moved
   * it to another hub, an admin of the review's hub who cannot even read that hub made it active there.
   * Then the undo still reopened the review in the hub the memory left (a move closes only open
   * reviews): an open review there about a memory it no longer holds. It is now refused.
   */
  it("refuses to reopen the review and leaves the memory in the other hub as it is", async () => {
    const adm = await h.user("Reviewer");
    const hubId = await h.teamHub(owner, [[adm, "admin"]]);
    const elsewhere = await h.teamHub(owner);
    const push = async (content: string) => (await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const a = await push("The API request timeout is 30 seconds.");
    const b = await push("The API request timeout is 60 seconds.");
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const review = await h.db.dreamAction.create({ data: { id: newId(), runId: run.id, hubId, actionType: "contradiction", state: "pending_review", sourceMemoryIds: [a, b], reason: "they disagree" } });
    expect((await adm.post(`/v1/dreams/actions/${review.id}/resolve`, { resolution: "keep_a" })).status).toBe(200);
    const moved = await owner.post("/v1/memories/batch-move", { ids: [b], hub_id: elsewhere });
    expect(moved.status, moved.text).toBe(200);
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: b } })).toMatchObject({ hubId: elsewhere, state: "archived" });
    const undone = await adm.post(`/v1/dreams/actions/${review.id}/undo`);
    expect(undone.status, undone.text).toBe(409);
    expect(undone.body.error.message).toMatch(/moved to another hub/);
    expect(await h.db.dreamAction.findUniqueOrThrow({ where: { id: review.id } })).toMatchObject({ state: "resolved", resolution: "keep_a" });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: b } })).toMatchObject({ hubId: elsewhere, state: "archived", supersededBy: a });
  });
});

describe("undoing the organize that emptied a dream's topic a member has since built under", () => {
  /**
   * The undo deleted the dream's topic once no memory was filed directly in it, though a member had
   * made subtopics under it: they were lifted to the top of the tree (the foreign key sets parent_id
   * to null), and with a top-level topic of the same name there the undo failed as a 409.
   */
  it("takes its memory out and keeps the topic, its subtopics where they were", async () => {
    const hubId = await h.teamHub(owner);
    const push = async (content: string) => (await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const sorted = await push("Kubernetes pods are autoscaled on CPU.");
    const logs = await push("Kubernetes pod logs are shipped to Loki.");
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const topic = await h.db.topic.create({ data: { id: newId(), hubId, name: "Kubernetes", createdBy: null } });
    await h.db.memory.update({ where: { id: sorted }, data: { topicId: topic.id } });
    const organize = await h.db.dreamAction.create({
      data: { id: newId(), runId: run.id, hubId, actionType: "organize", state: "applied", sourceMemoryIds: [sorted], resultMemoryId: sorted, toTopicId: topic.id, createdTopic: true, reason: "grouped" },
    });
    const child = await owner.post("/v1/topics", { name: "Logging", hub_id: hubId, parent_id: topic.id });
    expect(child.status, child.text).toBe(201);
    expect((await owner.post("/v1/topics", { name: "Logging", hub_id: hubId })).status).toBe(201);
    await h.db.memory.update({ where: { id: logs }, data: { topicId: child.body.data.id } });

    const undone = await owner.post(`/v1/dreams/actions/${organize.id}/undo`);
    expect(undone.status, undone.text).toBe(200);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: sorted } })).topicId).toBeNull();
    expect(await h.db.topic.findUnique({ where: { id: topic.id } })).not.toBeNull();
    expect((await h.db.topic.findUniqueOrThrow({ where: { id: child.body.data.id } })).parentId).toBe(topic.id);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: logs } })).topicId).toBe(child.body.data.id);
  });
});

describe("what a run reads of the hub's earlier decisions", () => {
  /**
   * Each phase read every undone action and every review the hub ever had, whatever memories they
   * named, to skip the few among the memories it considers: a hub with years of decisions read them
   * all, three times a run. It now reads only those naming the memories it looks at; it skips the same.
   */
  it("reads no decision about memories the run does not consider, and still skips what was undone or flagged", async () => {
    const { hubId, ids } = await seedHub();
    const old = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const elsewhere = Array.from({ length: 40 }, () => newId());
    const at = Date.now() - 30 * DAY;
    const decision = (i: number, actionType: string, state: string, sourceMemoryIds: string[]) => ({ id: newId(at + i), runId: old.id, hubId, actionType, state, sourceMemoryIds, reason: "earlier", createdAt: new Date(at + i) });
    await h.db.dreamAction.createMany({
      data: [
        ...elsewhere.slice(0, 10).map((id, i) => decision(i, "archive", "undone", [id])),
        ...elsewhere.slice(10, 20).map((id, i) => decision(10 + i, "organize", "undone", [id])),
        ...elsewhere.slice(20, 30).map((id, i) => decision(20 + i, "merge", "undone", [id, elsewhere[30 + i]!])),
        ...elsewhere.slice(20, 30).map((id, i) => decision(30 + i, "contradiction", "resolved", [elsewhere[30 + i]!, id])),
        // The planted ones: an undone archive, an undone filing, an undone merge and a review kept both.
        decision(40, "archive", "undone", [ids.stale1]),
        decision(41, "organize", "undone", [ids.k8s1]),
        decision(42, "merge", "undone", [ids.dupOld1, ids.dupNew1]),
        decision(43, "contradiction", "resolved", [ids.contraNew, ids.contraOld]),
      ],
    });
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const seen: unknown[] = [];
    expect(await runDreamRunOnce(readSpy(h.db, seen), runId)).toBe(true);
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).status).toBe("completed");
    const read = JSON.stringify(seen);
    expect(elsewhere.filter((id) => read.includes(id))).toEqual([]);
    const actions = await h.db.dreamAction.findMany({ where: { runId } });
    const names = (type: string, id: string) => actions.some((a) => a.actionType === type && a.sourceMemoryIds.includes(id));
    expect([names("archive", ids.stale1), names("organize", ids.k8s1), names("merge", ids.dupOld1), names("contradiction", ids.contraOld)]).toEqual([false, false, false, false]);
    // What was not decided before is done as ever.
    expect([names("archive", ids.stale2), names("merge", ids.dupOld2), names("organize", ids.k8s2)]).toEqual([true, true, true]);
  }, 120_000);
});

describe("what makes a memory stale", () => {
  /**
   * Staleness was judged by updated_at, which filing into a topic (a dream's own organize step, or a
   * member's) and other writes that leave the text alone also move: a memory unread for 200 days,
   * filed last week, counted as changed last week and stayed for another 90 days. It is now judged by
   * when its title or content last changed (and it must still never have been read).
   */
  it("archives a memory unread and unchanged for 200 days though it was filed into a topic last week; not one edited since", async () => {
    const hubId = await h.teamHub(owner);
    const topic = await owner.post("/v1/topics", { name: "Office", hub_id: hubId });
    expect(topic.status, topic.text).toBe(201);
    const post = async (content: string) => (await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const filed = await post("Temporary note: the office wifi password changes next week.");
    const edited = await post("Reminder to renew the conference booth reservation before the deadline.");
    const longAgo = new Date(Date.now() - 200 * DAY);
    await backdateMemories(h.db, [filed, edited], { createdAt: longAgo, updatedAt: longAgo });
    // A week ago: one is filed (its text untouched), the other's text is rewritten.
    const weekAgo = new Date(Date.now() - 7 * DAY);
    const filing = await owner.post(`/v1/topics/${topic.body.data.id}/memories`, { memory_id: filed });
    expect(filing.status, filing.text).toBeLessThan(300);
    await backdateMemories(h.db, filed, { updatedAt: weekAgo, contentChangedAt: longAgo });
    await backdateMemories(h.db, edited, { updatedAt: weekAgo, contentChangedAt: weekAgo });
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    expect(await runDreamRunOnce(h.db, runId)).toBe(true);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: filed } })).state).toBe("archived");
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: edited } })).state).toBe("active");
    const archive = await h.db.dreamAction.findFirstOrThrow({ where: { runId, actionType: "archive" } });
    expect(archive.sourceMemoryIds).toEqual([filed]);
    expect(archive.reason).toContain("has not changed for 200 days");
  }, 120_000);
});

describe("the report of a run with more than 5000 actions", () => {
  /**
   * The report was written from the run's first 5000 actions only, so a run over a large hub that
   * organized thousands of memories (the bench's 10k hub does 4,636 actions) reported fewer than it did
   * in the summary line the CLI prints, while the run's counts said otherwise.
   */
  it("counts every action in its summary and sections, as the run's counts do", async () => {
    const hubId = await h.teamHub(owner);
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "queued", phase: "done" } });
    const at = Date.now() - 60_000;
    await h.db.dreamAction.createMany({
      data: [
        ...Array.from({ length: 5_001 }, (_, i) => ({ id: newId(at + i), runId: run.id, hubId, actionType: "organize", state: "applied", sourceMemoryIds: [newId()], reason: `closest ${i}`, createdAt: new Date(at + i) })),
        { id: newId(at + 6_000), runId: run.id, hubId, actionType: "archive", state: "applied", sourceMemoryIds: [newId()], reason: "never read", createdAt: new Date(at + 6_000) },
      ],
    });
    expect(await runDreamRunOnce(h.db, run.id)).toBe(true);
    const res = await owner.get(`/v1/dreams/${run.id}`);
    expect(res.status, res.text).toBe(200);
    expect([res.body.data.memories_organized, res.body.data.memories_archived]).toEqual([5_001, 1]);
    const report: string = res.body.data.report;
    expect(report.split("\n")[0]).toBe("Archived 1 stale memory, organized 5001 memories.");
    expect(report).toContain("## Organized into topics (5001)");
    expect(report).toContain("- … and 4981 more");
    expect(report).toContain("## Archived as stale (1)\n\n- never read");
  }, 120_000);
});

describe("what a hard delete leaves of its memory in dream actions", () => {
  it("drops a merge's original content and a review's excerpt of it, closes its open reviews and their bell rows, single and batch", async () => {
    const admin = await h.user("Deleting admin");
    const hubId = await h.teamHub(owner, [[admin, "admin"]]);
    const push = async (content: string) => (await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const [older, kept, a, b, c, d] = [
      await push("Old: the deploy key lives in vault/ops."),
      await push("The deploy key lives in vault/ops, rotated monthly."),
      await push("The API request timeout is 30 seconds."),
      await push("The API request timeout is 60 seconds."),
      await push("The upload limit is 10 MB."),
      await push("The upload limit is 50 MB."),
    ];
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const merge = await h.db.dreamAction.create({
      data: {
        id: newId(), runId: run.id, hubId, actionType: "merge", state: "applied", sourceMemoryIds: [older, kept], resultMemoryId: kept, reason: "duplicates",
        details: { archived_id: older, kept_id: kept, rewritten: true, model: "m", original_content: "SECRET-ORIGINAL of the kept memory", original_content_hash: "h1", merged_content_hash: "h2" },
      },
    });
    const review = async (x: string, y: string, ex: string, ey: string) => {
      const action = await h.db.dreamAction.create({
        data: {
          id: newId(), runId: run.id, hubId, actionType: "contradiction", state: "pending_review", sourceMemoryIds: [x, y], reason: "they disagree",
          details: { key: "k", values: ["1", "2"], a: { id: x, title: "A", excerpt: ex }, b: { id: y, title: "B", excerpt: ey }, options: ["keep_a", "keep_b", "keep_both"] },
        },
      });
      for (const who of [owner, admin]) {
        await h.db.notification.create({ data: { id: newId(), userId: who.id, hubId, kind: "review_contradiction", sourceKind: "dream_action", sourceId: action.id, payload: {} } });
      }
      return action;
    };
    const first = await review(a, b, "SECRET-EXCERPT-A", "excerpt of b");
    const second = await review(c, d, "excerpt of c", "SECRET-EXCERPT-D");

    expect((await owner.delete(`/v1/memories/${a}`)).status).toBe(200);
    const batch = await admin.post("/v1/memories/batch-delete", { ids: [kept, d] });
    expect(batch.status, batch.text).toBe(200);
    expect(batch.body.data.deleted).toBe(2);

    const listed = await admin.get(`/v1/dreams/${run.id}/actions`);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.text).not.toMatch(/SECRET/);
    const byId = new Map<string, any>(listed.body.data.actions.map((x: { id: string }) => [x.id, x]));
    expect(byId.get(merge.id)).toMatchObject({ state: "applied", details: { archived_id: older, kept_id: kept, rewritten: true } });
    for (const [action, gone, stays, excerpt] of [[first, "a", "b", "excerpt of b"], [second, "b", "a", "excerpt of c"]] as const) {
      const shown = byId.get(action.id);
      expect(shown).toMatchObject({ state: "resolved", resolution: "memory_deleted", resolved_at: expect.any(String) });
      expect(shown.details[gone]).not.toHaveProperty("excerpt");
      expect(shown.details[stays].excerpt).toBe(excerpt);
      // No admin is left with a decision that cannot be made.
      expect(await h.db.notification.count({ where: { sourceId: action.id, status: "pending" } })).toBe(0);
      const resolve = await owner.post(`/v1/dreams/actions/${action.id}/resolve`, { resolution: "keep_both" });
      expect([resolve.status, resolve.body.error?.code]).toEqual([409, "conflict"]);
      const reopen = await owner.post(`/v1/dreams/actions/${action.id}/undo`);
      expect([reopen.status, reopen.body.error?.code]).toEqual([409, "conflict"]);
    }
  });

  // The bell rows of a review name both memories with their titles: a hard delete closed the review and
  // expired its rows, but every recipient could still read the deleted memory's title in them.
  it("a hard delete drops the deleted memory's title from the review's notifications, open or decided", async () => {
    const hubId = await h.teamHub(owner);
    const hub = await h.db.hub.findUniqueOrThrow({ where: { id: hubId } });
    const push = async (title: string) => (await owner.post("/v1/memories", { title, content: `${title}: the content.` }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const [a, b, c, d] = [await push("SECRET-TITLE-A"), await push("Title of b"), await push("Title of c"), await push("SECRET-TITLE-D")];
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const reviews = [[a, b], [c, d]].map(([x, y]) => ({
      id: newId(), runId: run.id, hubId, reason: "they disagree", similarity: 0.9, a: { id: x!, title: x === a ? "SECRET-TITLE-A" : "Title of c" }, b: { id: y!, title: y === d ? "SECRET-TITLE-D" : "Title of b" },
    }));
    for (const review of reviews) {
      await h.db.dreamAction.create({
        data: { id: review.id, runId: run.id, hubId, actionType: "contradiction", state: "pending_review", sourceMemoryIds: [review.a.id, review.b.id], reason: review.reason, details: {} },
      });
    }
    await onContradictionsFlagged(h.db, { id: hubId, name: hub.name }, reviews, new Date());
    // The second one decided first: its rows are closed, not expired, and still show the titles.
    expect((await owner.post(`/v1/dreams/actions/${reviews[1]!.id}/resolve`, { resolution: "keep_both" })).status).toBe(200);
    expect((await owner.delete(`/v1/memories/${a}`)).status).toBe(200);
    const batch = await owner.post("/v1/memories/batch-delete", { ids: [d] });
    expect(batch.status, batch.text).toBe(200);

    const rows = await h.db.notification.findMany({ where: { sourceId: { in: reviews.map((r) => r.id) } } });
    expect(rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(rows.map((row) => row.payload))).not.toMatch(/SECRET/);
    const listed = await owner.get("/v1/notifications?limit=100");
    expect(listed.status, listed.text).toBe(200);
    expect(listed.text).not.toMatch(/SECRET/);
    // The shape stays (ids, a string title); the side still there keeps its title.
    for (const row of rows) {
      const payload = row.payload as { memory_a: { id: string; title: string }; memory_b: { id: string; title: string } };
      if (row.sourceId === reviews[0]!.id) {
        expect(payload).toMatchObject({ memory_a: { id: a, title: expect.any(String) }, memory_b: { id: b, title: "Title of b" } });
      } else {
        expect(payload).toMatchObject({ memory_a: { id: c, title: "Title of c" }, memory_b: { id: d, title: expect.any(String) } });
      }
    }
  });

  // A run's actions quote both memories' titles in their reason (and a review in details.a/b.title),
  // and its report and the review's bell rows quote the reasons: each still named a deleted memory.
  it("a hard delete leaves no title of the memory in a real run's actions, report or bell rows", async () => {
    const hubId = await h.teamHub(owner);
    const planted = [
      ["SECRET-DUP-OLD", PLANTED.dupOld1, -5], ["Dup new", PLANTED.dupNew1, -4],
      ["SECRET-CONTRA-OLD", PLANTED.contraOld, -3], ["Contra new", PLANTED.contraNew, -2], ["SECRET-STALE", PLANTED.stale1, -200],
    ] as const;
    const ids: string[] = [];
    for (const [title, content, days] of planted) {
      const res = await owner.post("/v1/memories", { title, content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      const at = new Date(Date.now() + days * DAY);
      await h.db.memory.update({ where: { id: res.body.data.id }, data: { createdAt: at, updatedAt: at } });
      ids.push(res.body.data.id);
    }
    await indexMemories(h.db, ids);
    const [dupOld, , contraOld, contraNew, stale] = ids as [string, string, string, string, string];
    await notifyProcessingFailed(h.db, { id: stale, hubId, ownerId: owner.id, title: "SECRET-STALE" }, "gave up");
    const res = await trigger(owner, hubId);
    expect(res.status, res.text).toBe(202);
    const runId = res.body.data.run_id as string;
    expect(await runDreamRunOnce(h.db, runId)).toBe(true);
    const before = [(await owner.get(`/v1/dreams/${runId}/actions?limit=100`)).text, (await owner.get(`/v1/dreams/${runId}`)).text, (await owner.get("/v1/notifications?limit=100")).text].join("");
    for (const title of ["SECRET-DUP-OLD", "SECRET-CONTRA-OLD", "SECRET-STALE"]) expect(before).toContain(title);

    for (const id of [dupOld, contraOld, stale]) expect((await owner.delete(`/v1/memories/${id}`)).status).toBe(200);

    const actions = await owner.get(`/v1/dreams/${runId}/actions?limit=100`);
    expect(actions.status, actions.text).toBe(200);
    expect(actions.text).not.toMatch(/SECRET/);
    const review = actions.body.data.actions.find((a: { action_type: string }) => a.action_type === "contradiction");
    expect(review.details).toMatchObject({ a: { id: contraOld, title: "(deleted)" }, b: { id: contraNew, title: "Contra new" } });
    expect(review.details).not.toHaveProperty("values");
    const run = await owner.get(`/v1/dreams/${runId}`);
    expect(run.status, run.text).toBe(200);
    expect(run.text).not.toMatch(/SECRET/);
    const report = await owner.get("/v1/dreams/report", { headers: { "x-hub-id": hubId } });
    expect(report.status, report.text).toBe(200);
    expect(report.text).not.toMatch(/SECRET/);
    const bell = await owner.get("/v1/notifications?limit=100");
    expect(bell.status, bell.text).toBe(200);
    expect(bell.text).not.toMatch(/SECRET/);
  }, 60_000);

  // A move to another hub left the old hub's dream actions, report and bell rows quoting the memory
  // (titles, a merge's original content, a review's excerpt): its members could no longer read the
  // memory, but still read those.
  it("a move to another hub leaves no title or content of the memory in the old hub's actions, report or bell rows", async () => {
    const watcher = await h.user("Old hub admin");
    const hubId = await h.teamHub(owner, [[watcher, "admin"]]);
    const target = await h.teamHub(owner);
    const planted = [
      ["SECRET-DUP-OLD", PLANTED.dupOld1, -5], ["Dup new", PLANTED.dupNew1, -4],
      ["SECRET-CONTRA-OLD", PLANTED.contraOld, -3], ["Contra new", PLANTED.contraNew, -2],
    ] as const;
    const ids: string[] = [];
    for (const [title, content, days] of planted) {
      const res = await owner.post("/v1/memories", { title, content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      const at = new Date(Date.now() + days * DAY);
      await backdateMemories(h.db, res.body.data.id, { createdAt: at, updatedAt: at });
      ids.push(res.body.data.id);
    }
    await indexMemories(h.db, ids);
    const [dupOld, dupNew, contraOld, contraNew] = ids as [string, string, string, string];
    const res = await trigger(owner, hubId);
    expect(res.status, res.text).toBe(202);
    const runId = res.body.data.run_id as string;
    expect(await runDreamRunOnce(h.db, runId)).toBe(true);
    // A merge whose model rewrote the kept memory keeps its text before the rewrite.
    const rewritten = await h.db.dreamAction.create({
      data: {
        id: newId(), runId, hubId, actionType: "merge", state: "applied", sourceMemoryIds: [dupNew, contraOld], resultMemoryId: contraOld, reason: "duplicates",
        details: { archived_id: dupNew, kept_id: contraOld, rewritten: true, model: "m", original_content: "SECRET-ORIGINAL of the kept memory", original_content_hash: "h1", merged_content_hash: "h2" },
      },
    });
    const reads = async () => [
      await watcher.get(`/v1/dreams/${runId}/actions?limit=100`),
      await watcher.get(`/v1/dreams/${runId}`),
      await watcher.get("/v1/dreams/report", { headers: { "x-hub-id": hubId } }),
      await watcher.get("/v1/notifications?limit=100"),
    ];
    const before = (await reads()).map((r) => r.text).join("");
    for (const secret of ["SECRET-DUP-OLD", "SECRET-CONTRA-OLD", "SECRET-ORIGINAL", PLANTED.contraOld]) expect(before).toContain(secret);

    const moved = await owner.post("/v1/memories/batch-move", { ids: [dupOld, contraOld], hub_id: target });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.data.moved).toBe(2);
    expect((await watcher.get(`/v1/memories/${contraOld}`)).status).toBe(404);

    const after = await reads();
    for (const r of after) expect(r.status, r.text).toBe(200);
    for (const r of after) {
      expect(r.text).not.toMatch(/SECRET/);
      expect(r.text).not.toContain(PLANTED.contraOld);
    }
    const actions = after[0]!.body.data.actions as { id: string; action_type: string; details: Record<string, any>; state: string }[];
    const review = actions.find((a) => a.action_type === "contradiction")!;
    expect(review).toMatchObject({ state: "resolved", details: { a: { id: contraOld, title: "(moved)" }, b: { id: contraNew, title: "Contra new" } } });
    expect(actions.find((a) => a.id === rewritten.id)!.details).not.toHaveProperty("original_content");
    // The owner, who reads both hubs, still finds the memory where it went.
    expect((await owner.get(`/v1/memories/${contraOld}`)).body.data).toMatchObject({ hub_id: target, title: "SECRET-CONTRA-OLD" });
  }, 60_000);

  // A phase scans the hub, then writes in batches; a memory moved to another hub in between was not
  // locked by the batch (lockMemoryRows takes the run's hub's rows only), yet the merge archived it
  // there as superseded by this hub's memory, and the organize step filed it into this hub's topic.
  it("a memory moved to another hub between a phase's scan and its batch is neither archived nor filed by the run", async () => {
    const hubId = await h.teamHub(owner);
    const target = await h.teamHub(owner);
    const planted = [["dupOld", PLANTED.dupOld1, -5], ["dupNew", PLANTED.dupNew1, -4], ...(["k8s1", "k8s2", "k8s3", "k8s4"] as const).map((key, i) => [key, PLANTED[key], -3 + i * 0.1] as const)] as const;
    const ids: Record<string, string> = {};
    for (const [key, content, days] of planted) {
      const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      const at = new Date(Date.now() + days * DAY);
      await backdateMemories(h.db, res.body.data.id, { createdAt: at, updatedAt: at });
      ids[key] = res.body.data.id;
    }
    await indexMemories(h.db, Object.values(ids));
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const config = dreamConfig();
    expect(await claimDreamRun(h.db, runId, "w", new Date(), config.staleRunMs)).toBe(true);
    const moveBeforeBatch = (id: string) =>
      changedBefore(h.db, ["$transaction"], async () => {
        const moved = await owner.post("/v1/memories/batch-move", { ids: [id], hub_id: target });
        expect(moved.body.data?.moved, moved.text).toBe(1);
      });
    await runDreamPhase({ db: moveBeforeBatch(ids.dupOld!), sql: h.database.sql, config }, runId, "w", "similar");
    await runDreamPhase({ db: moveBeforeBatch(ids.k8s1!), sql: h.database.sql, config }, runId, "w", "organize");
    // The run did work in its own hub (so the batches ran), none on the memories that left it.
    expect(await h.db.memory.count({ where: { id: { in: [ids.k8s2!, ids.k8s3!, ids.k8s4!] }, topicId: { not: null } } })).toBeGreaterThan(0);
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: ids.dupOld! } })).toMatchObject({ hubId: target, state: "active", supersededBy: null });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: ids.k8s1! } })).toMatchObject({ hubId: target, topicId: null });
    expect(await h.db.dreamAction.count({ where: { runId, sourceMemoryIds: { hasSome: [ids.dupOld!, ids.k8s1!] } } })).toBe(0);
  }, 60_000);

  // The report is built from the run's actions read before its closing transaction: a delete
  // committing in between rewrote the action's reason, and the report then quoted the old one.
  it("a delete committing while the run writes its report leaves no title of the memory in it", async () => {
    const hubId = await h.teamHub(owner);
    const push = async (title: string) => (await owner.post("/v1/memories", { title, content: `${title}: the content.` }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const [gone, kept] = [await push("SECRET-LATE"), await push("Kept late")];
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "running", phase: "done", leaseOwner: "w", startedAt: new Date(), heartbeatAt: new Date() } });
    await h.db.dreamAction.create({
      data: { id: newId(), runId: run.id, hubId, actionType: "merge", state: "applied", sourceMemoryIds: [gone, kept], resultMemoryId: kept, reason: `"SECRET-LATE" is a near-duplicate of the newer "Kept late"`, details: {} },
    });
    const db = changedBefore(h.db, ["$transaction"], async () => expect((await owner.delete(`/v1/memories/${gone}`)).status).toBe(200));
    expect(await finishDreamRun({ db, sql: h.database.sql, config: dreamConfig() }, run.id, "w", false)).toBe("completed");
    const shown = await owner.get(`/v1/dreams/${run.id}`);
    expect(shown.status, shown.text).toBe(200);
    expect(shown.body.data.report).toContain(DELETED_REASON.merge);
    expect(shown.text).not.toMatch(/SECRET/);
  });

  // A run's batch holds its run's row (the heartbeat) while it locks memories; a delete rewriting the
  // run's report locked that row after the memory's: the two waited for each other.
  it.skipIf(!testPostgres())("a delete does not wait for a running run's row, which its batch holds while locking memories", async () => {
    const hubId = await h.teamHub(owner);
    const push = async (title: string) => (await owner.post("/v1/memories", { title, content: `${title}: the content.` }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const [gone, kept] = [await push("Gone while running"), await push("Kept while running")];
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "running", phase: "organize", leaseOwner: "w", startedAt: new Date(), heartbeatAt: new Date() } });
    await h.db.dreamAction.create({
      data: { id: newId(), runId: run.id, hubId, actionType: "merge", state: "applied", sourceMemoryIds: [gone, kept], resultMemoryId: kept, reason: `"Gone while running" is a near-duplicate of "Kept while running"`, details: {} },
    });
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let deletion: Promise<{ status: number; text: string }> | undefined;
    let locked: string[] = [];
    try {
      await side.query("BEGIN");
      await side.query("UPDATE dream_runs SET heartbeat_at = now() WHERE id = $1", [run.id]);
      let settled = false;
      deletion = owner.delete(`/v1/memories/${gone}`).finally(() => (settled = true));
      const blocked = async () => ((await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))")).rows[0] as { n: number }).n;
      for (let waited = 0; !settled && (await blocked()) < 1; waited += 20) {
        if (waited > 20_000) throw new Error("the delete neither finished nor waited for the run's row");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // The batch goes on to lock its memories in id order (lockMemoryRows).
      locked = (await side.query("SELECT id::text AS id FROM memories WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE", [[gone, kept]])).rows.map((row: { id: string }) => row.id);
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    const deleted = await deletion!;
    expect(deleted.status, deleted.text).toBe(200);
    expect(locked).toEqual([kept]);
  }, 60_000);

  it("a decided review whose memory was deleted since is not reopened", async () => {
    const hubId = await h.teamHub(owner);
    const push = async (content: string) => (await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const a = await push("Backups run at 02:00 UTC.");
    const b = await push("Backups run at 04:00 UTC.");
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const action = await h.db.dreamAction.create({
      data: { id: newId(), runId: run.id, hubId, actionType: "contradiction", state: "pending_review", sourceMemoryIds: [a, b], reason: "they disagree", details: {} },
    });
    expect((await owner.post(`/v1/dreams/actions/${action.id}/resolve`, { resolution: "keep_both" })).status).toBe(200);
    expect((await owner.delete(`/v1/memories/${b}`)).status).toBe(200);
    const reopen = await owner.post(`/v1/dreams/actions/${action.id}/undo`);
    expect([reopen.status, reopen.body.error?.code]).toEqual([409, "conflict"]);
    expect(await h.db.dreamAction.findUniqueOrThrow({ where: { id: action.id } })).toMatchObject({ state: "resolved", resolution: "keep_both" });
  });
});

describe("a merge pair a member changes while the run writes", () => {
  /**
   * A merge was judged on the texts read at the scan, and its batch archived the older memory if it
   * was still active, whatever happened since: a member's rewrite of it into something else was
   * archived as a duplicate of the other, and a newer side the member archived meanwhile left both
   * archived, the older "superseded" by a memory no longer in use.
   */
  async function changeAfterFirstBatch(change: (pair: { older: string; newer: string }) => Promise<void>) {
    const { hubId, ids } = await seedHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const config = dreamConfig({ batchSize: 1 });
    expect(await claimDreamRun(h.db, runId, "worker", new Date(), config.staleRunMs)).toBe(true);
    let changed: { older: string; newer: string } | undefined;
    const afterBatch = async (phase: string) => {
      if (phase !== "similar" || changed) return;
      const done = await h.db.dreamAction.findMany({ where: { runId, actionType: "merge" } });
      const pairs = [{ older: ids.dupOld1, newer: ids.dupNew1 }, { older: ids.dupOld2, newer: ids.dupNew2 }];
      changed = pairs.find((p) => !done.some((a) => a.sourceMemoryIds.includes(p.older)));
      await change(changed!);
    };
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, runId, "worker")).toBe("completed");
    const merges = await h.db.dreamAction.findMany({ where: { runId, actionType: "merge" } });
    // The phase counts what it wrote, and leaves only what it archived out of the rest of the run: the
    // organize step considers every memory unsorted at the scan but those the run archived (a member's
    // archive since is not known to it). It counted every pair found and left every older side out.
    const metrics = (await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).phaseMetrics as Record<string, Record<string, number>>;
    expect(metrics.similar!.actions).toBe(await h.db.dreamAction.count({ where: { runId, actionType: { in: ["merge", "contradiction"] } } }));
    const unsortedNow = await h.db.memory.count({ where: { hubId, topicId: null } });
    const filed = await h.db.dreamAction.count({ where: { runId, actionType: "organize" } });
    const archivedByRun = await h.db.dreamAction.count({ where: { runId, actionType: { in: ["merge", "archive"] } } });
    expect(metrics.organize!.candidates).toBe(unsortedNow + filed - archivedByRun);
    return { pair: changed!, merges };
  }

  it("does not archive an older side the member rewrote since the scan", async () => {
    const { pair, merges } = await changeAfterFirstBatch(async ({ older }) => {
      expect((await owner.patch(`/v1/memories/${older}`, { content: "The office kitchen is cleaned on Fridays." })).status).toBe(200);
    });
    expect(merges.filter((a) => a.sourceMemoryIds.includes(pair.older))).toEqual([]);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: pair.older } })).state).toBe("active");
  }, 120_000);

  it("does not merge into a newer side the member archived since the scan", async () => {
    const { pair, merges } = await changeAfterFirstBatch(async ({ newer }) => {
      expect((await owner.patch(`/v1/memories/${newer}`, { state: "archived" })).status).toBe(200);
    });
    expect(merges.filter((a) => a.sourceMemoryIds.includes(pair.older))).toEqual([]);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: pair.older } })).state).toBe("active");
  }, 120_000);
});

/**
 * A run of a seeded hub, one memory a batch: after the stale phase's first batch, `change` is made to
 * the stale memory it has not archived yet. Returns that memory, and how many active unsorted memories
 * the hub had once the stale phase was done (what the organize step has to consider).
 */
async function changeStaleAfterFirstBatch(change: (id: string) => Promise<void>): Promise<{ runId: string; changed: string; unsorted: number }> {
  const { hubId, ids } = await seedHub();
  const runId = (await trigger(owner, hubId)).body.data.run_id as string;
  const config = dreamConfig({ batchSize: 1 });
  expect(await claimDreamRun(h.db, runId, "worker", new Date(), config.staleRunMs)).toBe(true);
  let changed: string | undefined;
  let unsorted = 0;
  const afterBatch = async (phase: string) => {
    if (phase !== "stale") return;
    unsorted = await h.db.memory.count({ where: { hubId, state: "active", topicId: null } });
    if (changed) return;
    const done = await h.db.dreamAction.findMany({ where: { runId, actionType: "archive" } });
    changed = [ids.stale1, ids.stale2].find((id) => !done.some((a) => a.sourceMemoryIds.includes(id)))!;
    await change(changed);
  };
  expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, runId, "worker")).toBe("completed");
  expect(changed).toBeDefined();
  return { runId, changed: changed!, unsorted };
}

describe("a stale memory a member marks stable while the run writes", () => {
  /**
   * The stale phase checked again at write time that a memory was still active, unread and unchanged,
   * but not that it was still not `stable`: one a member marked stable after the scan was archived.
   */
  it("is not archived", async () => {
    const { runId, changed: marked } = await changeStaleAfterFirstBatch(async (id) => {
      expect((await owner.patch(`/v1/memories/${id}`, { stability: "stable" })).status).toBe(200);
    });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: marked } })).toMatchObject({ state: "active", stability: "stable" });
    expect(await h.db.dreamAction.count({ where: { runId, actionType: "archive", sourceMemoryIds: { has: marked } } })).toBe(0);
  }, 120_000);

  /**
   * The phase counted every memory its scan found as an action, and left all of them out of the rest
   * of the run, also the ones it spared at write time: the run's metrics claimed archives it never
   * made, and its organize step skipped a memory still active and unsorted.
   */
  it("is neither counted as archived nor left out of the organize step", async () => {
    const { runId, unsorted } = await changeStaleAfterFirstBatch(async (id) => {
      expect((await owner.patch(`/v1/memories/${id}`, { stability: "stable" })).status).toBe(200);
    });
    const metrics = (await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).phaseMetrics as Record<string, Record<string, number>>;
    expect(await h.db.dreamAction.count({ where: { runId, actionType: "archive" } })).toBe(1);
    expect(metrics.stale).toMatchObject({ candidates: 2, actions: 1 });
    expect(metrics.organize!.candidates).toBe(unsorted);
  }, 120_000);
});

describe("a stale memory a member moves to another hub while the run writes", () => {
  /**
   * The stale batch locked its memories in the run's hub but threw the locked set away, and its
   * write-time check and archive went by id alone. A move leaves content_changed_at (staleness goes by
   * it), so a memory moved to another hub after the scan was archived there, by a run of a hub it no
   * longer belongs to, and the archive recorded in the old hub.
   */
  it("is not archived, and no archive of it is recorded in the run's hub", async () => {
    const { changed: moved } = await changeStaleAfterFirstBatch(async (id) => {
      const res = await owner.post("/v1/memories/batch-move", { ids: [id], hub_id: owner.personalHubId });
      expect(res.status, res.text).toBe(200);
      expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).hubId).toBe(owner.personalHubId);
    });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: moved } })).toMatchObject({ hubId: owner.personalHubId, state: "active" });
    expect(await h.db.dreamAction.count({ where: { sourceMemoryIds: { has: moved } } })).toBe(0);
  }, 120_000);
});

/** One try of the dream function under Inngest's test engine, at the attempt given; it must fail (its error log muted). */
async function failingTry(hubId: string, runId: string, at: { attempt: number; maxAttempts: number; runId?: string }): Promise<void> {
  const logged = vi.spyOn(console, "error").mockImplementation(() => {});
  try {
    const run = await new InngestTestEngine({
      function: dreamRunFunction,
      events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }],
      transformCtx: (ctx) => mockCtx({ ...ctx, ...at }),
    }).execute();
    expect(run.error).toBeDefined();
  } finally {
    logged.mockRestore();
  }
}

describe("a run whose phase fails", () => {
  /**
   * A database error inside a phase, as a constraint or a lost connection raises it: here a trigger
   * on this hub's dream actions that raises one quoting a memory's SQL, as such errors do.
   */
  async function failingHub(): Promise<string> {
    const hubId = await h.teamHub(owner);
    const ids: string[] = [];
    for (const content of [PLANTED.dupOld1, PLANTED.dupNew1]) ids.push((await owner.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string);
    await indexMemories(h.db, ids);
    await h.db.$executeRawUnsafe(`CREATE OR REPLACE FUNCTION test_fail_dream_actions() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.hub_id = '${hubId}'::uuid THEN RAISE EXCEPTION 'INSERT INTO internal_table failed near secret_column'; END IF; RETURN NEW; END $$`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER test_fail_dream_actions BEFORE INSERT ON dream_actions FOR EACH ROW EXECUTE FUNCTION test_fail_dream_actions()`);
    return hubId;
  }
  const cleanUp = () => h.db.$executeRawUnsafe(`DROP TRIGGER IF EXISTS test_fail_dream_actions ON dream_actions`);

  /**
   * The in-process worker ended the run failed with the exception's own text as its `error`, which
   * every member reading the hub's runs saw: the database's statement, table and column names. It now
   * says the run failed and where the details are (the server log, under the run's id).
   */
  it("in process: ends failed with an error that quotes nothing of the database's", async () => {
    const hubId = await failingHub();
    try {
      const runId = (await trigger(owner, hubId)).body.data.run_id as string;
      const logged = vi.spyOn(console, "error").mockImplementation(() => {});
      try {
        expect(await runDreamRunOnce(h.db, runId)).toBe(true);
      } finally {
        logged.mockRestore();
      }
      const res = await owner.get(`/v1/dreams/${runId}`);
      expect(res.body.data.status).toBe("failed");
      expect(res.body.data.error).not.toMatch(/internal_table|secret_column|INSERT/);
      expect(res.body.data.error).toContain(runId);
    } finally {
      await cleanUp();
    }
  }, 120_000);

  /**
   * Under Inngest, a phase that still failed on its step's last try left the run `running`: once its
   * heartbeat went stale the daily schedule sent it again, to fail the same way, and meanwhile every
   * trigger of the hub answered `already_running` with it. Its last try now ends it failed, as the
   * in-process worker does, and the hub can be dreamt again.
   */
  it("under Inngest: the last try of a failing phase ends the run failed, and the hub takes a new run", async () => {
    const hubId = await failingHub();
    try {
      const runId = (await trigger(owner, hubId)).body.data.run_id as string;
      await failingTry(hubId, runId, { attempt: 3, maxAttempts: 4 });
      const failed = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
      expect(failed.status).toBe("failed");
      expect(failed.error).not.toMatch(/internal_table|secret_column/);
      const next = await trigger(owner, hubId);
      expect(next.body.data).toEqual({ status: "queued", run_id: expect.any(String) });
    } finally {
      await cleanUp();
    }
  }, 120_000);

  /** Only the last try ends it: an earlier one leaves the run to Inngest's retry, under the same lease. */
  it("under Inngest: an earlier try of a failing phase leaves the run running under its lease, for the retry", async () => {
    const hubId = await failingHub();
    try {
      const runId = (await trigger(owner, hubId)).body.data.run_id as string;
      // Inngest's run id, the same for each step and retry of the function run: the lease's owner.
      const functionRunId = `fn-${runId}`;
      await failingTry(hubId, runId, { runId: functionRunId, attempt: 0, maxAttempts: 4 });
      expect(await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "running", leaseOwner: `inngest-${functionRunId}`, error: null, finishedAt: null });
      expect((await trigger(owner, hubId)).body.data).toMatchObject({ status: "already_running", run_id: runId });
    } finally {
      await cleanUp();
    }
  }, 120_000);

  /**
   * The step read the run's row before its try: a database error there on the last try failed the
   * step with the run left `running`, the very state the last try's handling is there to end.
   */
  it("under Inngest: the last try ends the run failed also when reading the run's row fails", async () => {
    const hubId = await h.teamHub(owner);
    const memory = (await owner.post("/v1/memories", { content: PLANTED.staging }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    await indexMemories(h.db, [memory]);
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    // The step's read of the run's phase fails as a database error does; the run's other columns still take writes.
    await h.db.$executeRawUnsafe(`ALTER TABLE dream_runs RENAME COLUMN phase TO test_phase_hidden`);
    try {
      const run = await new InngestTestEngine({
        function: dreamRunFunction,
        events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }],
        transformCtx: (ctx) => mockCtx({ ...ctx, attempt: 3, maxAttempts: 4 }),
      }).execute();
      expect(run.error).toBeDefined();
    } finally {
      await h.db.$executeRawUnsafe(`ALTER TABLE dream_runs RENAME COLUMN test_phase_hidden TO phase`);
      logged.mockRestore();
    }
    const failed = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
    expect(failed.status).toBe("failed");
    expect(failed.error).not.toMatch(/phase|column/);
    expect((await trigger(owner, hubId)).body.data).toEqual({ status: "queued", run_id: expect.any(String) });
  }, 120_000);
});

describe("an unsorted memory a member rewrites while the run works", () => {
  /**
   * The organize phase files memories by what the run read of them at its start: one a member rewrote
   * since (about something else now, its new text not yet embedded) was filed by its old text, where
   * a memory with an edit pending is otherwise left for the run after it is processed.
   */
  it("is not filed by its old text", async () => {
    const { hubId, ids, frontendTopic } = await seedHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const config = dreamConfig({ batchSize: 1 });
    expect(await claimDreamRun(h.db, runId, "worker", new Date(), config.staleRunMs)).toBe(true);
    let edited = false;
    const afterBatch = async (phase: string) => {
      if (phase !== "similar" || edited) return;
      edited = true;
      expect((await owner.patch(`/v1/memories/${ids.frontUnsorted1}`, { content: "The quarterly budget review moved to the first Monday of the month." })).status).toBe(200);
    };
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, runId, "worker")).toBe("completed");
    expect(edited).toBe(true);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: ids.frontUnsorted1 } })).topicId).toBeNull();
    // The other, unchanged, is filed as before.
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: ids.frontUnsorted2 } })).topicId).toBe(frontendTopic);
    // The phase counts what it filed and created, not what it planned: the memory it left was counted as filed.
    const metrics = (await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).phaseMetrics as Record<string, Record<string, number>>;
    expect(metrics.organize).toMatchObject({
      actions: await h.db.dreamAction.count({ where: { runId, actionType: "organize" } }),
      topics_created: await h.db.topic.count({ where: { hubId, createdBy: null } }),
    });
  }, 120_000);
});

describe("a new topic's cluster whose every memory a member rewrites while the run works", () => {
  /**
   * The organize batch created a cluster's topic before it knew whether any of its memories would
   * still be filed: when none was (each rewritten since the scan), the topic stayed, empty, recorded
   * by no action, so no undo could remove it.
   */
  it("leaves no empty topic behind", async () => {
    const { hubId, ids } = await seedHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const config = dreamConfig({ batchSize: 1 });
    expect(await claimDreamRun(h.db, runId, "worker", new Date(), config.staleRunMs)).toBe(true);
    let edited = false;
    const afterBatch = async (phase: string) => {
      if (phase !== "similar" || edited) return;
      edited = true;
      for (const key of ["k8s1", "k8s2", "k8s3", "k8s4"] as const) {
        expect((await owner.patch(`/v1/memories/${ids[key]}`, { content: `${PLANTED[key]} (rewritten: ${key})` })).status).toBe(200);
      }
    };
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, runId, "worker")).toBe("completed");
    expect(edited).toBe(true);
    // Every topic the run made holds what it was made for, and each is recorded by an action an undo can find.
    const made = await h.db.topic.findMany({ where: { hubId, createdBy: null }, select: { id: true, _count: { select: { memories: true } } } });
    expect(made.filter((topic) => topic._count.memories === 0)).toEqual([]);
    for (const topic of made) expect(await h.db.dreamAction.count({ where: { runId, toTopicId: topic.id, createdTopic: true } })).toBe(1);
    const metrics = (await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).phaseMetrics as Record<string, Record<string, number>>;
    expect(metrics.organize!.topics_created).toBe(made.length);
  }, 120_000);
});

describe("a contradiction whose side is deleted while the run writes", () => {
  /**
   * The excerpts of both sides were read before the batches: a side hard-deleted between that read and
   * its batch still got a new pending review, carrying an excerpt of the content the delete removed.
   */
  it("is not flagged: no review names the deleted memory or quotes it", async () => {
    const { hubId, ids } = await seedHub();
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const config = dreamConfig({ batchSize: 1 });
    expect(await claimDreamRun(h.db, runId, "worker", new Date(), config.staleRunMs)).toBe(true);
    let deletedAt = -1;
    const afterBatch = async (phase: string, batch: number) => {
      if (phase !== "similar" || deletedAt !== -1) return;
      // Only while the contradiction is still to be written (its batch comes after this one).
      expect(await h.db.dreamAction.count({ where: { runId, actionType: "contradiction" } })).toBe(0);
      expect((await owner.delete(`/v1/memories/${ids.contraNew}`)).status).toBe(200);
      deletedAt = batch;
    };
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, runId, "worker")).toBe("completed");
    expect(deletedAt).toBe(1);
    const actions = await h.db.dreamAction.findMany({ where: { runId } });
    expect(actions.filter((a) => a.sourceMemoryIds.includes(ids.contraNew))).toEqual([]);
    expect(JSON.stringify(actions.map((a) => a.details))).not.toContain(PLANTED.contraNew);
    expect(await h.db.notification.count({ where: { kind: "review_contradiction", hubId, status: "pending" } })).toBe(0);
  }, 120_000);
});

describe("a run whose hub is purged after its last batch", () => {
  /**
   * A purge between the run's last batch and its closing transaction took the run's row: the closing
   * step read it with findUniqueOrThrow, so the run ended on "No record was found", logged as a failed
   * run (and an Inngest finish step failed with its retries), where a purge anywhere else stops it
   * quietly as a lost lease. The purge runs after the last phase's record, through the run's own hook.
   */
  it("stops as a lost lease", async () => {
    const hubId = await h.teamHub(owner);
    expect((await owner.post("/v1/memories", { content: "The on-call rota changes every Monday." }, { headers: { "x-hub-id": hubId } })).status).toBe(201);
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const config = dreamConfig();
    expect(await claimDreamRun(h.db, runId, "purged", new Date(), config.staleRunMs)).toBe(true);
    const afterBatch = async (phase: string) => {
      if (phase === DREAM_PHASES.at(-1)) await h.database.sql.query("DELETE FROM hubs WHERE id = $1", [hubId]);
    };
    await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, runId, "purged")).rejects.toBeInstanceOf(LostLeaseError);
    expect(await h.db.hub.count({ where: { id: hubId } })).toBe(0);
  }, 120_000);
});

describe("a run whose hub is purged right after it finished", () => {
  /**
   * Once its last transaction committed, the run read its row again (for the hub whose boards to ask):
   * a purge of the hub committing in between (its cascade takes the run's row) made that read throw.
   * The in-process worker read it outside the guard of its board kick and logged the finished run as
   * failed; the Inngest function's boards step failed, and with its retries the function run. Here a
   * second connection holds the events lock, so the run's closing transaction waits inside; a third
   * asks for dream_runs whole behind it, gets it as that transaction commits, and purges the hub
   * before the run's next read of the table can go on.
   */
  async function purgedOnFinish<T>(start: (runId: string, hubId: string) => Promise<T>): Promise<{ outcome: T; errors: string[] }> {
    const hubId = await h.teamHub(owner);
    expect((await owner.post("/v1/memories", { content: "The on-call rota changes every Monday." }, { headers: { "x-hub-id": hubId } })).status).toBe(201);
    const runId = (await trigger(owner, hubId)).body.data.run_id as string;
    const events = new pg.Client({ connectionString: h.url! });
    const purge = new pg.Client({ connectionString: h.url! });
    const watcher = new pg.Client({ connectionString: h.url! });
    await Promise.all([events.connect(), purge.connect(), watcher.connect()]);
    const waiting = async (n: number, what: string) => {
      for (let waited = 0; ; waited += 20) {
        const { rows } = await watcher.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
        if (rows[0].n >= n) return;
        if (waited > 60_000) throw new Error(`${what} never waited`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const errors = vi.spyOn(console, "error");
    let ran: Promise<T> | undefined;
    try {
      await events.query("BEGIN");
      await events.query("SELECT pg_advisory_xact_lock($1::bigint)", [0x656e6772]);
      ran = start(runId, hubId);
      await waiting(1, "the run's closing transaction");
      await purge.query("BEGIN");
      const locked = purge.query("LOCK TABLE dream_runs IN ACCESS EXCLUSIVE MODE");
      await waiting(2, "the purge");
      await events.query("ROLLBACK");
      await locked;
      expect((await purge.query("SELECT status FROM dream_runs WHERE id = $1", [runId])).rows).toEqual([{ status: "completed" }]);
      await waiting(1, "the run's read after it");
      await purge.query("DELETE FROM hubs WHERE id = $1", [hubId]);
      await purge.query("COMMIT");
      const outcome = await ran;
      expect(await h.db.hub.count({ where: { id: hubId } })).toBe(0);
      return { outcome, errors: errors.mock.calls.map((call) => String(call[0])) };
    } finally {
      errors.mockRestore();
      await events.query("ROLLBACK").catch(() => {});
      await purge.query("ROLLBACK").catch(() => {});
      await Promise.all([events.end(), purge.end(), watcher.end()]);
      await ran?.catch(() => {});
    }
  }

  it.skipIf(!testPostgres())("the in-process worker: the run answers done and logs no failure", async () => {
    const { outcome, errors } = await purgedOnFinish((runId) => runDreamRunOnce(h.db, runId));
    expect(outcome).toBe(true);
    // Before: "[engram] dreams: run … failed" with the read's "No record was found".
    expect(errors).toEqual([]);
  }, 120_000);

  it.skipIf(!testPostgres())("the Inngest function: it ends with the run's status, its boards step asks no board", async () => {
    const { outcome } = await purgedOnFinish((runId, hubId) =>
      new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] }).execute(),
    );
    // Before: the boards step threw "No record was found" (and the function run failed with it).
    expect(outcome.error).toBeUndefined();
    expect(outcome.result).toEqual({ status: "completed" });
  }, 120_000);
});
