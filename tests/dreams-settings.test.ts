import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { classifyPair } from "@/lib/dreams/classify-pair.ts";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { dueHubs, runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { claimDreamRun, executeDreamRun } from "@/lib/dreams/run-dream.ts";
import { textFeatures } from "@/lib/dreams/text-features.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import type { KINDS } from "@/lib/memories/memory-fields.ts";
import { indexMemories } from "./recall-helpers.ts";
import { backdateMemories } from "./support/backdate-memories.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

/*
 * The settings of a hub's owner (GET/PATCH /v1/settings, Memax's Settings) steer that hub's dream runs:
 * the switches, the excluded kinds, the similarity threshold and the staleness days (docs/dreams.md).
 * Each run here is the real one, queued through POST /v1/dreams/trigger.
 */

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

const DAY = 86_400_000;

const PLANTED = {
  dupOld: "Use pnpm, not npm, for installing dependencies in the web repo.",
  dupNew: "In the web repo we install dependencies with pnpm instead of npm.",
  contraOld: "The API request timeout is 30 seconds.",
  contraNew: "The API request timeout is 60 seconds.",
  // Unread for 200 days: stale under any setting.
  stale: "Temporary note: the office wifi password changes next week.",
  // Unread for 40 days: stale only once the person says a month is enough.
  month: "Reminder to renew the conference booth reservation before the deadline.",
  k8s1: "Kubernetes pods in the cluster are autoscaled with the horizontal pod autoscaler on CPU.",
  k8s2: "Each Kubernetes deployment sets pod resource requests and limits for CPU and memory.",
  k8s3: "Kubernetes pod logs are shipped from the cluster to Loki by a DaemonSet.",
  k8s4: "Restart a stuck Kubernetes pod with kubectl rollout restart on its deployment.",
} as const;
type Key = keyof typeof PLANTED;

async function seed(client: Client, hubId: string, kinds: Partial<Record<Key, (typeof KINDS)[number]>> = {}): Promise<Record<Key, string>> {
  const ids = {} as Record<Key, string>;
  const base = Date.now() - 10 * DAY;
  let i = 0;
  for (const key of Object.keys(PLANTED) as Key[]) {
    const res = await client.post("/v1/memories", { content: PLANTED[key], stability: "evolving", kind: kinds[key] ?? "semantic" }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    ids[key] = res.body.data.id;
    const at = key === "stale" ? new Date(Date.now() - 200 * DAY) : key === "month" ? new Date(Date.now() - 40 * DAY) : new Date(base + i++ * 60_000);
    await backdateMemories(h.db, ids[key], { createdAt: at, updatedAt: at });
  }
  await indexMemories(h.db, Object.values(ids));
  return ids;
}

/** A run queued as a member asks for it, and run to its end. */
async function dream(client: Client, hubId: string): Promise<string> {
  const res = await client.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
  expect(res.status, res.text).toBe(202);
  const runId: string = res.body.data.run_id;
  expect(await runDreamRunOnce(h.db, runId)).toBe(true);
  expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).status).toBe("completed");
  return runId;
}

async function touched(runId: string, type: string): Promise<string[]> {
  const actions = await h.db.dreamAction.findMany({ where: { runId, actionType: type } });
  return actions.flatMap((a) => a.sourceMemoryIds).sort();
}

const state = async (id: string) => (await h.db.memory.findUniqueOrThrow({ where: { id } })).state;

describe("dream runs follow the settings of the hub's owner", () => {
  it("merge, archive and organize switched off: nothing merged, archived or filed; contradictions still flagged", async () => {
    const ann = await h.user("Ann");
    const ids = await seed(ann, ann.personalHubId);
    const res = await ann.patch(`/v1/hubs/${ann.personalHubId}`, { settings: { dreams_merge_enabled: false, dreams_archive_enabled: false, dreams_organize_enabled: false } });
    expect(res.status, res.text).toBe(200);
    const runId = await dream(ann, ann.personalHubId);
    expect(await touched(runId, "merge")).toEqual([]);
    expect(await touched(runId, "archive")).toEqual([]);
    expect(await touched(runId, "organize")).toEqual([]);
    expect(await touched(runId, "contradiction")).toEqual([ids.contraOld, ids.contraNew].sort());
    for (const key of ["dupOld", "stale"] as const) expect(await state(ids[key])).toBe("active");
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: ids.k8s1 } })).topicId).toBeNull();
    const metrics = (await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).phaseMetrics as Record<string, Record<string, number>>;
    expect(metrics.stale).toMatchObject({ skipped: 1, actions: 0 });
    expect(metrics.organize).toMatchObject({ skipped: 1, actions: 0 });
  });

  it("memories of an excluded kind are neither merged, archived nor filed; the rest are", async () => {
    const ben = await h.user("Ben");
    const ids = await seed(ben, ben.personalHubId, { dupOld: "procedural", stale: "procedural", k8s1: "procedural" });
    expect((await ben.patch("/v1/settings", { dreams_excluded_kinds: ["procedural"] })).status).toBe(200);
    const runId = await dream(ben, ben.personalHubId);
    expect(await touched(runId, "merge")).toEqual([]);
    expect(await state(ids.dupOld)).toBe("active");
    expect(await state(ids.stale)).toBe("active");
    expect(await touched(runId, "archive")).not.toContain(ids.stale);
    const filed = await touched(runId, "organize");
    expect(filed).not.toContain(ids.k8s1);
    expect(filed).toEqual(expect.arrayContaining([ids.k8s2, ids.k8s3, ids.k8s4]));
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: ids.k8s1 } })).topicId).toBeNull();
  });

  it("the staleness days and the similarity threshold replace the install's", async () => {
    const cat = await h.user("Cat");
    const first = await seed(cat, cat.personalHubId);
    // The install's 90 days: the 40-day-old note stays; the duplicates merge at the install's 0.9.
    const before = await dream(cat, cat.personalHubId);
    expect(await touched(before, "archive")).toEqual([first.stale]);
    expect(await touched(before, "merge")).toEqual([first.dupOld, first.dupNew].sort());
    const dan = await h.user("Dan");
    const ids = await seed(dan, dan.personalHubId);
    expect((await dan.patch("/v1/settings", { dreams_staleness_days: 30, dreams_similarity_threshold: 0.99 })).status).toBe(200);
    const runId = await dream(dan, dan.personalHubId);
    expect(await touched(runId, "archive")).toEqual([ids.stale, ids.month].sort());
    expect(await touched(runId, "merge")).toEqual([]);
    expect(await state(ids.dupOld)).toBe("active");
  });

  it("a team hub's run follows its owner's settings, not the triggering member's", async () => {
    const owner = await h.user("Olga");
    const admin = await h.user("Adam");
    const hubId = await h.teamHub(owner, [[admin, "admin"]]);
    const ids = await seed(owner, hubId);
    expect((await owner.patch("/v1/settings", { dreams_similarity_threshold: 0.99 })).status).toBe(200);
    expect((await admin.patch("/v1/settings", { dreams_staleness_days: 3650 })).status).toBe(200);
    const runId = await dream(admin, hubId);
    expect(await touched(runId, "merge")).toEqual([]);
    expect(await touched(runId, "archive")).toEqual([ids.stale]);
  });

  it("dreams_enabled false on a hub: the schedule skips it; a manual trigger still runs", async () => {
    const eve = await h.user("Eve");
    const teamHub = await h.teamHub(eve);
    const overridden = await h.teamHub(eve);
    for (const hubId of [eve.personalHubId, teamHub, overridden]) {
      expect((await eve.post("/v1/memories", { content: "A hub with a fresh write." }, { headers: { "x-hub-id": hubId } })).status).toBe(201);
    }
    const due = () => dueHubs(h.db, new Date(), 24, 100_000);
    expect(await due()).toEqual(expect.arrayContaining([eve.personalHubId, teamHub, overridden]));
    for (const hubId of [eve.personalHubId, teamHub]) expect((await eve.patch(`/v1/hubs/${hubId}`, { settings: { dreams_enabled: false } })).status).toBe(200);
    expect((await eve.patch(`/v1/hubs/${overridden}`, { settings: { dreams_enabled: true } })).status).toBe(200);
    const later = await due();
    expect(later).not.toContain(eve.personalHubId);
    expect(later).not.toContain(teamHub);
    expect(later).toContain(overridden);
    // A scheduled run queued before the switch (or by a worker that read it before) takes no step.
    const stale = await eve.post("/v1/memories", { content: "Temporary note: the office wifi password changes next week." }, { headers: { "x-hub-id": eve.personalHubId } });
    const old = new Date(Date.now() - 200 * DAY);
    await backdateMemories(h.db, stale.body.data.id, { createdAt: old, updatedAt: old });
    await indexMemories(h.db, [stale.body.data.id]);
    // A contradicting pair too: the similar step's reviews are each a notification to every manager,
    // and a hub switched off must not send them.
    const pair: string[] = [];
    for (const [i, content] of [PLANTED.contraOld, PLANTED.contraNew].entries()) {
      const res = await eve.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": eve.personalHubId } });
      expect(res.status, res.text).toBe(201);
      pair.push(res.body.data.id);
      const at = new Date(Date.now() - 10 * DAY + i * 60_000);
      await backdateMemories(h.db, res.body.data.id, { createdAt: at, updatedAt: at });
    }
    await indexMemories(h.db, pair);
    const scheduled = await queueDreamRun(h.db, eve.personalHubId, null, new Date());
    expect(await runDreamRunOnce(h.db, scheduled.run_id)).toBe(true);
    expect(await touched(scheduled.run_id, "archive")).toEqual([]);
    expect(await touched(scheduled.run_id, "contradiction")).toEqual([]);
    expect(await h.db.notification.count({ where: { userId: eve.id, kind: "review_contradiction" } })).toBe(0);
    expect(await state(stale.body.data.id)).toBe("active");
    const metrics = (await h.db.dreamRun.findUniqueOrThrow({ where: { id: scheduled.run_id } })).phaseMetrics as Record<string, Record<string, number>>;
    for (const phase of ["similar", "stale", "organize"]) expect(metrics[phase]).toMatchObject({ skipped: 1, actions: 0 });
    // Asked for by a member, it runs: the switch is about the schedule.
    const manual = await dream(eve, eve.personalHubId);
    expect(await touched(manual, "archive")).toEqual([stale.body.data.id]);
    expect(await touched(manual, "contradiction")).toEqual([...pair].sort());
  });
});

describe("a member's trigger while a scheduled run of a hub switched off waits", () => {
  /**
   * The trigger answers already_running with the run waiting, and a scheduled run of a hub whose dreams
   * are off takes no step: the member who asked (the switch is about the schedule, docs/dreams.md) got
   * a run id that did nothing. The waiting run is now theirs, and runs as asked.
   */
  it("runs that run as the member's", async () => {
    const ivy = await h.user("Ivy");
    const res = await ivy.post("/v1/memories", { content: PLANTED.stale, stability: "evolving" }, { headers: { "x-hub-id": ivy.personalHubId } });
    expect(res.status, res.text).toBe(201);
    const old = new Date(Date.now() - 200 * DAY);
    await backdateMemories(h.db, res.body.data.id, { createdAt: old, updatedAt: old });
    await indexMemories(h.db, [res.body.data.id]);
    const scheduled = await queueDreamRun(h.db, ivy.personalHubId, null, new Date());
    expect((await ivy.patch(`/v1/hubs/${ivy.personalHubId}`, { settings: { dreams_enabled: false } })).status).toBe(200);
    const asked = await ivy.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": ivy.personalHubId } });
    expect(asked.status, asked.text).toBe(202);
    expect(asked.body.data).toMatchObject({ status: "already_running", run_id: scheduled.run_id });
    expect(await runDreamRunOnce(h.db, scheduled.run_id)).toBe(true);
    expect(await touched(scheduled.run_id, "archive")).toEqual([res.body.data.id]);
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: scheduled.run_id } })).triggeredBy).toBe(ivy.id);
  });
});

describe("a memory changed to an excluded kind during the run", () => {
  it("is not filed by the organize step that planned with its old kind", async () => {
    const gus = await h.user("Gus");
    const ids = await seed(gus, gus.personalHubId);
    expect((await gus.patch("/v1/settings", { dreams_excluded_kinds: ["procedural"] })).status).toBe(200);
    const runId = (await gus.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": gus.personalHubId } })).body.data.run_id as string;
    const config = dreamConfig();
    expect(await claimDreamRun(h.db, runId, "worker", new Date(), config.staleRunMs)).toBe(true);
    let changed = false;
    // The run read the hub's memories in its first phase, and the later ones plan by that read.
    const afterBatch = async (phase: string) => {
      if (phase !== "stale" || changed) return;
      changed = true;
      const res = await gus.patch(`/v1/memories/${ids.k8s1}`, { kind: "procedural" });
      expect(res.status, res.text).toBe(200);
    };
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, runId, "worker")).toBe("completed");
    expect(changed).toBe(true);
    expect(await touched(runId, "organize")).not.toContain(ids.k8s1);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: ids.k8s1 } })).topicId).toBeNull();
    expect(await touched(runId, "organize")).toEqual(expect.arrayContaining([ids.k8s2, ids.k8s3, ids.k8s4]));
  });
});

describe("a memory changed to an excluded kind between a run's batches", () => {
  it("is not merged by a later batch of the similar step, nor archived by the stale step", async () => {
    const hal = await h.user("Hal");
    const ids = await seed(hal, hal.personalHubId);
    expect((await hal.patch("/v1/settings", { dreams_excluded_kinds: ["procedural"] })).status).toBe(200);
    const runId = (await hal.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hal.personalHubId } })).body.data.run_id as string;
    const config = dreamConfig({ batchSize: 1 });
    expect(await claimDreamRun(h.db, runId, "worker", new Date(), config.staleRunMs)).toBe(true);
    let changedBeforeMerge = false;
    let changedBeforeArchive = false;
    const afterBatch = async (phase: string, batch: number) => {
      // After the first batch of each step (the review, then the first stale archive): the rest of
      // the step writes what it planned before.
      if (batch !== 1) return;
      if (phase === "similar" && !changedBeforeMerge) {
        changedBeforeMerge = (await h.db.dreamAction.count({ where: { runId, actionType: "merge" } })) === 0;
        expect((await hal.patch(`/v1/memories/${ids.dupOld}`, { kind: "procedural" })).status).toBe(200);
      }
      if (phase === "stale" && !changedBeforeArchive) {
        const archived = await touched(runId, "archive");
        const other = archived.includes(ids.stale) ? ids.month : ids.stale;
        changedBeforeArchive = archived.length === 1;
        expect((await hal.patch(`/v1/memories/${other}`, { kind: "procedural" })).status).toBe(200);
      }
    };
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config: { ...config, staleDays: 30 }, afterBatch }, runId, "worker")).toBe("completed");
    expect(changedBeforeMerge).toBe(true);
    expect(await touched(runId, "merge")).toEqual([]);
    expect(await state(ids.dupOld)).toBe("active");
    expect(changedBeforeArchive).toBe(true);
    expect(await touched(runId, "archive")).toHaveLength(1);
    expect([await state(ids.stale), await state(ids.month)].sort()).toEqual(["active", "archived"]);
  });
});

describe("the similarity threshold below the contradiction floor", () => {
  it("merges pairs at least that similar (the 0.8 contradiction gate no longer hides them)", () => {
    const a = textFeatures("Use pnpm, not npm, for installing dependencies in the web repo.");
    const b = textFeatures("Use pnpm, not npm, for installing the dependencies of the web repo.");
    const config = { ...dreamConfig(), duplicateCosine: 0.7 };
    expect(classifyPair(a, b, 0.75, config).kind).toBe("duplicate");
    // At the install's threshold the same pair is not.
    expect(classifyPair(a, b, 0.75, dreamConfig()).kind).toBe("distinct");
  });
});

describe("a contradiction below the contradiction floor, under a lower similarity threshold", () => {
  /**
   * Below 0.8 the contradiction checks were skipped altogether, so under a threshold of 0.7 two values
   * of one setting were taken for duplicates: the older value archived, merged away with no review.
   * Such a pair is not flagged there (contradictions keep their 0.8), and never merged either.
   */
  it("is neither merged nor flagged", () => {
    const config = { ...dreamConfig(), duplicateCosine: 0.7 };
    const pairs: [string, string][] = [
      ["The API request timeout is 30 seconds.", "The API request timeout is 60 seconds."],
      ["The session cookie lifetime is 14 days.", "The session cookie lifetime is 30 days."],
      ["Deploys to production run on Fridays.", "Deploys to production never run on Fridays."],
    ];
    for (const [a, b] of pairs) {
      const at75 = classifyPair(textFeatures(a), textFeatures(b), 0.75, config);
      expect(at75.kind, `${a} / ${b}: ${at75.reason}`).toBe("distinct");
      // At the floor the same pair is a contradiction.
      expect(classifyPair(textFeatures(a), textFeatures(b), 0.85, config).kind).toBe("contradiction");
    }
  });
});

describe("a member's trigger while a scheduled run is on", () => {
  /** The trigger made a scheduled run the member's even once it ran, its first phases already skipped as switched off. */
  it("adopts the scheduled run only while it waits, not once it runs", async () => {
    const gil = await h.user("Gil");
    const hubId = await h.teamHub(gil);
    const waiting = await queueDreamRun(h.db, hubId, null, new Date());
    const trigger = () => gil.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
    expect((await trigger()).body.data).toMatchObject({ status: "already_running", run_id: waiting.run_id });
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: waiting.run_id } })).triggeredBy).toBe(gil.id);
    expect(await runDreamRunOnce(h.db, waiting.run_id)).toBe(true);

    const scheduled = await queueDreamRun(h.db, hubId, null, new Date());
    expect(await claimDreamRun(h.db, scheduled.run_id, "worker", new Date(), dreamConfig().staleRunMs)).toBe(true);
    expect((await trigger()).body.data).toMatchObject({ status: "already_running", run_id: scheduled.run_id });
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: scheduled.run_id } })).triggeredBy).toBeNull();
  });
});
