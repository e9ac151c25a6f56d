import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InngestTestEngine } from "@inngest/test";
import { dreamRunFunction } from "@/inngest/dream-functions.ts";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { DREAM_RUN_EVENT, dueHubs, runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { claimDreamRun, executeDreamRun } from "@/lib/dreams/run-dream.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { indexMemories } from "./recall-helpers.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// A run's time budget (ENGRAM_DREAM_MAX_SECONDS) is the run's, across the attempts that resume it.

let h: Harness;
let owner: Client;
beforeAll(async () => {
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  await h?.close();
});

const HOUR = 3_600_000;

/** Two near-duplicate pairs: with a batch of one, the similar step writes in two batches. */
async function hubWithTwoMerges(): Promise<string> {
  const hubId = await h.teamHub(owner);
  const ids: string[] = [];
  for (const content of [
    "Use pnpm, not npm, for installing dependencies in the web repo.",
    "In the web repo we install dependencies with pnpm instead of npm.",
    "Deploys to production happen every Tuesday after the standup, using the release script.",
    "Production deploys happen each Tuesday after standup with the release script.",
  ]) {
    const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    ids.push(res.body.data.id);
  }
  await indexMemories(h.db, ids);
  return hubId;
}

/** A run a worker claimed an hour ago and that crashed after its first batch. */
async function crashedAnHourAgo(hubId: string) {
  const run = await queueDreamRun(h.db, hubId, owner.id, new Date(Date.now() - HOUR));
  const config = dreamConfig({ batchSize: 1 });
  const then = new Date(Date.now() - HOUR);
  expect(await claimDreamRun(h.db, run.run_id, "doomed", then, config.staleRunMs)).toBe(true);
  const crash = new Error("simulated crash");
  const afterBatch = () => {
    throw crash;
  };
  await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch, now: () => then }, run.run_id, "doomed")).rejects.toBe(crash);
  expect(await h.db.dreamAction.count({ where: { runId: run.run_id } })).toBe(1);
  return { runId: run.run_id, config };
}

describe("a run resumed after its time budget is spent", () => {
  /**
   * The budget was counted from each attempt's own start: every resume (a crashed worker's, a stopped
   * one's, a re-sent Inngest event's) got a fresh 300 s, and a run that kept being resumed ran for as
   * long as it kept being resumed. It is now counted from the run's first claim.
   */
  it("in process: ends partial_failed at its resume, doing nothing more", async () => {
    const { runId, config } = await crashedAnHourAgo(await hubWithTwoMerges());
    expect(await claimDreamRun(h.db, runId, "rescuer", new Date(), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, runId, "rescuer")).toBe("partial_failed");
    expect(await h.db.dreamAction.count({ where: { runId } })).toBe(1);
    expect(await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "partial_failed", error: expect.stringMatching(/budget/) });
  }, 120_000);

  it("under Inngest: a function run taking the run over ends it partial_failed, doing nothing more", async () => {
    const hubId = await hubWithTwoMerges();
    const { runId } = await crashedAnHourAgo(hubId);
    const { result } = await new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] }).execute();
    expect(result).toEqual({ status: "partial_failed" });
    expect(await h.db.dreamAction.count({ where: { runId } })).toBe(1);
  }, 120_000);

  it("a run resumed within its budget goes on to the end", async () => {
    const hubId = await hubWithTwoMerges();
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig({ batchSize: 1 });
    expect(await claimDreamRun(h.db, run.run_id, "doomed", new Date(), config.staleRunMs)).toBe(true);
    const crash = new Error("simulated crash");
    await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch: () => Promise.reject(crash) }, run.run_id, "doomed")).rejects.toBe(crash);
    expect(await claimDreamRun(h.db, run.run_id, "rescuer", new Date(Date.now() + config.staleRunMs + 1_000), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, run.run_id, "rescuer")).toBe("completed");
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "merge" } })).toBe(2);
  }, 120_000);
});

describe("a run whose budget runs out right after a phase's last batch", () => {
  /**
   * The phase's done record went through the same budget check as a batch: out of time just after the
   * last batch committed, it was refused, the run ended partial_failed still in that phase, and the next
   * run read and compared the hub again (its model calls asked again) to write nothing new. The record
   * is saved whenever the phase's batches are; the budget only stops the work still to do.
   */
  it("records the phase done, and the run continues from the next phase", async () => {
    const hubId = await hubWithTwoMerges();
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig({ batchSize: 1 });
    let clock = Date.now();
    const now = () => new Date(clock);
    expect(await claimDreamRun(h.db, run.run_id, "worker", now(), config.staleRunMs)).toBe(true);
    const afterBatch = (phase: string, batch: number) => {
      // The similar step's last batch (two merges, a batch of one each): the budget is spent just after it.
      if (phase === "similar" && batch === 2) clock += config.maxRunMs + 1_000;
    };
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch, now }, run.run_id, "worker")).toBe("partial_failed");
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "merge" } })).toBe(2);
    const after = await h.db.dreamRun.findUniqueOrThrow({ where: { id: run.run_id } });
    expect(after.phase).toBe("stale");
    expect((after.phaseMetrics as Record<string, { actions: number }>).similar).toMatchObject({ actions: 2, batches: 2 });
    expect(after.memoriesScanned).toBe(4);
  }, 120_000);
});

describe("the schedule after a run out of time", () => {
  /**
   * A run out of its budget ends partial_failed, "the next run continues" (docs/dreams.md), but the
   * schedule took only hubs written to since their last run: a hub no member wrote to again was never
   * dreamt of again, its stale and unsorted memories left as the run stopped. It is due once the
   * interval has passed, as a written hub is, until a run ends completed.
   */
  it("takes the hub again once the interval has passed, without a new write", async () => {
    const hubId = await hubWithTwoMerges();
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    expect(await runDreamRunOnce(h.db, run.run_id, { config: dreamConfig({ maxRunMs: 0 }) })).toBe(true);
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: run.run_id } })).status).toBe("partial_failed");
    expect(await dueHubs(h.db, new Date(), 24, 10_000)).not.toContain(hubId);
    expect(await dueHubs(h.db, new Date(Date.now() + 25 * HOUR), 24, 10_000)).toContain(hubId);
    // The next run finishes what was left: the hub is not due again without a write.
    const next = await queueDreamRun(h.db, hubId, null, new Date());
    expect(await runDreamRunOnce(h.db, next.run_id)).toBe(true);
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: next.run_id } })).status).toBe("completed");
    expect(await dueHubs(h.db, new Date(Date.now() + 50 * HOUR), 24, 10_000)).not.toContain(hubId);
  }, 120_000);
});

describe("the daily schedule's own jitter", () => {
  /**
   * The Inngest cron fires once a day, and the interval is a day too: its runs are created at the time
   * the schedule's step read, and a hub was due only if its last run was created before exactly one
   * interval ago. On a day the cron's step ran a few seconds earlier than the day before, every hub it
   * queued then was not yet due, and waited another whole day (dreamt every other day).
   */
  it("takes a hub written to since its last run at the next day's schedule, a few seconds early", async () => {
    const hubId = await h.teamHub(owner);
    const res = await owner.post("/v1/memories", { content: "A hub the cron dreams of every day." }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    const yesterday = new Date(Date.now() - 24 * HOUR + 5_000);
    expect(await dueHubs(h.db, yesterday, 24, 100_000)).toContain(hubId);
    const run = await queueDreamRun(h.db, hubId, null, yesterday);
    expect(await runDreamRunOnce(h.db, run.run_id)).toBe(true);
    expect((await owner.post("/v1/memories", { content: "Written since that run." }, { headers: { "x-hub-id": hubId } })).status).toBe(201);
    // Today's step, 3 s earlier in its minute than yesterday's.
    expect(await dueHubs(h.db, new Date(yesterday.getTime() + 24 * HOUR - 3_000), 24, 100_000)).toContain(hubId);
    // Still not twice within the interval.
    expect(await dueHubs(h.db, new Date(yesterday.getTime() + 12 * HOUR), 24, 100_000)).not.toContain(hubId);
  }, 120_000);
});
