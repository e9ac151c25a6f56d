import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InngestTestEngine, mockCtx } from "@inngest/test";
import { dreamRunFunction } from "@/inngest/dream-functions.ts";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { DREAM_RUN_EVENT, startDreams, stopDreams } from "@/lib/dreams/dream-runner.ts";
import { claimDreamRun, runBudgetStart, runDreamPhase, StoppedError } from "@/lib/dreams/run-dream.ts";
import { newId } from "@/lib/ids.ts";
import { indexMemories } from "./recall-helpers.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { startFakeOpenAiChat, type FakeOpenAiChat } from "./support/openai-chat-fake.ts";

// Two attempts of one Inngest dream step (a step's request cut, and its retry under the same lease), and
// attempts after a graceful stop in the same process. Its own file: the stop's mark is process-wide.

const MODEL_ENV = { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test" };
const saved = { ...process.env };
const PAIR = ["Use pnpm, not npm, for installing dependencies in the web repo.", "In the web repo we install dependencies with pnpm instead of npm."];
let h: Harness;
let ann: Client;
let fake: FakeOpenAiChat;
/** What the model does while it "thinks" about a merge (the test's turn to act); a string is its answer. */
let meanwhile: () => Promise<string | void> = async () => {};

beforeAll(async () => {
  fake = await startFakeOpenAiChat(async () => {
    const act = meanwhile;
    meanwhile = async () => {};
    const answer = await act();
    return { content: answer || `${PAIR[1]} ${PAIR[0]}` };
  });
  h = await createHarness();
  ann = await h.user("Ann");
  Object.assign(process.env, MODEL_ENV, { OPENAI_BASE_URL: fake.url });
});
afterAll(async () => {
  for (const key of [...Object.keys(MODEL_ENV), "OPENAI_BASE_URL", "INNGEST_DEV"]) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
  await h?.close();
  await fake?.close();
});

async function pairRun(): Promise<{ hubId: string; runId: string }> {
  const hubId = await h.teamHub(ann);
  const ids: string[] = [];
  for (const content of PAIR) {
    const res = await ann.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    ids.push(res.body.data.id);
  }
  await indexMemories(h.db, ids);
  const trigger = await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
  expect(trigger.status, trigger.text).toBe(202);
  return { hubId, runId: trigger.body.data.run_id };
}

/** As a server running dreams under Inngest starts again in this process (no in-process worker to take the run meanwhile). */
async function restart(): Promise<void> {
  process.env.INNGEST_DEV = "1";
  try {
    await startDreams();
  } finally {
    delete process.env.INNGEST_DEV;
  }
}

/**
 * `functionRunId`: Inngest's run id, the same for a step's attempts (and the lease they share).
 * `retry`: a retry of a step, Inngest's attempt number (ctx.attempt): its claim is memoized (never run
 * again), replayed as the claim step of the first attempt left it.
 */
const engine = (hubId: string, runId: string, functionRunId?: string, retry?: { attempt: number; claim: { owner: string; startedAt: number } }) =>
  new InngestTestEngine({
    function: dreamRunFunction,
    events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }],
    ...(functionRunId && { transformCtx: (ctx) => mockCtx({ ...ctx, runId: functionRunId, ...(retry && { attempt: retry.attempt }) }) }),
    ...(retry && { steps: [{ id: "claim", handler: () => retry.claim }] }),
  });
const execute = (hubId: string, runId: string, functionRunId?: string, retry?: { attempt: number; claim: { owner: string; startedAt: number } }) =>
  engine(hubId, runId, functionRunId, retry).execute();

/** The claim step's result as memoized by the first attempt of a function run (whose claim took the run). */
async function memoizedClaim(runId: string, functionRunId: string) {
  const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
  expect(run.leaseOwner).toBe(`inngest-${functionRunId}`);
  return { owner: run.leaseOwner!, startedAt: runBudgetStart(run, new Date()) };
}

describe("a late attempt of an Inngest phase step beside its retry", () => {
  /**
   * The step's retry runs under the same lease (the function run's): the late attempt, finishing its
   * phase after the retry had recorded it and the next one, moved the run back a phase and wrote its
   * own metrics over the retry's (here its merge: 0 actions instead of 1).
   */
  it("does not move the run back, nor write over what the retry recorded", async () => {
    const { hubId, runId } = await pairRun();
    meanwhile = async () => {
      // This attempt's request was cut while the model thought; the retry runs the phase and the next.
      const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
      const model = process.env.ENGRAM_CHAT_MODEL;
      delete process.env.ENGRAM_CHAT_MODEL;
      try {
        const deps = { db: h.db, sql: h.database.sql, config: dreamConfig() };
        for (const phase of ["similar", "stale"] as const) await runDreamPhase(deps, runId, run.leaseOwner!, phase, runBudgetStart(run, new Date()));
      } finally {
        process.env.ENGRAM_CHAT_MODEL = model;
      }
      expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).phase).toBe("organize");
    };
    const { result } = await execute(hubId, runId);
    expect(result).toEqual({ status: "completed" });
    const run = await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } });
    expect((run.phaseMetrics as Record<string, Record<string, number>>).similar).toMatchObject({ actions: 1 });
    expect(await h.db.dreamAction.count({ where: { runId, actionType: "merge" } })).toBe(1);
  }, 120_000);
});

describe("a late attempt of an Inngest phase step after its retry has started", () => {
  /**
   * The retry holds the same lease (the function run's), so the cut attempt's next batch still matched
   * it: its merge, with its own model answer, was written beside the retry that had begun the phase
   * again. Each attempt takes the run as its own (dream_runs.attempt_token): the late batch writes nothing.
   * The retry is a retry of the phase step alone: its claim is memoized (a claim run again would shut the
   * late attempt out by itself), so only the phase step's take keeps the late batch out.
   */
  it("commits no batch of the late attempt", async () => {
    const { hubId, runId } = await pairRun();
    const functionRunId = newId();
    const LATE = "Install the web repo's dependencies with pnpm (the late attempt).";
    const RETRY = "Install the web repo's dependencies with pnpm (the retry).";
    let retryAsks!: () => void;
    const retryAsked = new Promise<void>((resolve) => (retryAsks = resolve));
    let lateEnded!: () => void;
    const lateDone = new Promise<void>((resolve) => (lateEnded = resolve));
    let retry: ReturnType<typeof execute> | undefined;
    meanwhile = async () => {
      // This attempt's request was cut while the model thought: the step's retry starts, and asks the model too.
      meanwhile = async () => {
        retryAsks();
        await lateDone;
        return RETRY;
      };
      retry = execute(hubId, runId, functionRunId, { attempt: 1, claim: await memoizedClaim(runId, functionRunId) });
      await retryAsked;
      return LATE;
    };
    const late = await execute(hubId, runId, functionRunId).finally(lateEnded);
    const { result } = await retry!;
    expect(late.result).toEqual({ status: "lost" });
    expect(result).toEqual({ status: "completed" });
    const merges = await h.db.dreamAction.findMany({ where: { runId, actionType: "merge" } });
    expect(merges).toHaveLength(1);
    const kept = await h.db.memory.findUniqueOrThrow({ where: { id: merges[0]!.resultMemoryId! } });
    expect(kept.content).toBe(RETRY);
  }, 120_000);
});

describe("a late attempt of an Inngest phase step taking the run after its retry took it", () => {
  /**
   * The take was last-writer-wins: an attempt cut before its take, going on once its retry had taken the
   * run, took it back, and the retry's next write found the run no longer its own. The function run ended
   * `lost` with the run left `running` (every trigger answered already_running until the next day's
   * schedule). An attempt takes the run only when the one holding it is not a later attempt of the step.
   */
  it("leaves the run with the retry, which completes it", async () => {
    const { hubId, runId } = await pairRun();
    const functionRunId = newId();
    expect(await claimDreamRun(h.db, runId, `inngest-${functionRunId}`, new Date(), dreamConfig().staleRunMs)).toBe(true);
    const claim = await memoizedClaim(runId, functionRunId);
    let late: { result?: unknown; error?: unknown } | undefined;
    meanwhile = async () => {
      // The retry (attempt 1) has taken the run and waits for the model: the first attempt goes on now.
      late = await engine(hubId, runId, functionRunId, { attempt: 0, claim }).executeStep("phase-similar");
    };
    const { result } = await execute(hubId, runId, functionRunId, { attempt: 1, claim });
    expect(late?.result).toBe("lost");
    expect(result).toEqual({ status: "completed" });
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).status).toBe("completed");
    expect(await h.db.dreamAction.count({ where: { runId, actionType: "merge" } })).toBe(1);
  }, 120_000);
});

describe("a phase step stopped by a graceful stop while its retry runs", () => {
  /**
   * The stopped attempt cleared the run's heartbeat by its lease's owner, which its retry shares: a
   * retry already running (the stop cut the step's request) lost its heartbeat, and any worker's sweep
   * took the run from under it. Only the heartbeat the stopped attempt itself left is cleared.
   */
  it("leaves the retry's heartbeat", async () => {
    const { hubId, runId } = await pairRun();
    const retryBeat = new Date(Date.now() + 60_000);
    meanwhile = async () => {
      await h.db.dreamRun.update({ where: { id: runId }, data: { heartbeatAt: retryBeat } });
      await stopDreams();
    };
    await execute(hubId, runId);
    expect(await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId }, select: { status: true, heartbeatAt: true } })).toEqual({ status: "running", heartbeatAt: retryBeat });
  }, 120_000);

  /**
   * The heartbeat read at the step's start is no beat of this attempt (the claim's, or a step before
   * it): cleared by the stopped attempt, a retry that had not yet beaten lost it all the same.
   */
  it("does not clear a heartbeat it never wrote", async () => {
    await restart();
    const { hubId, runId } = await pairRun();
    let before: Date | null = null;
    meanwhile = async () => {
      before = (await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).heartbeatAt;
      await stopDreams();
    };
    await execute(hubId, runId);
    expect(before).not.toBeNull();
    expect(await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId }, select: { status: true, heartbeatAt: true } })).toEqual({ status: "running", heartbeatAt: before });
  }, 120_000);

  /**
   * A stopped attempt whose phase the retry had recorded meanwhile still wrote the heartbeat in its
   * phase-done commit (its phase guard matched nothing) and told the step of that beat: the step's clear
   * then matched it and wiped the retry's heartbeat.
   */
  it("writes no heartbeat in a phase-done commit its retry overtook", async () => {
    const hubId = await h.teamHub(ann);
    const res = await ann.post("/v1/memories", { content: "The staging database is rebuilt every Sunday night." }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    const trigger = await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } });
    expect(trigger.status, trigger.text).toBe(202);
    const runId: string = trigger.body.data.run_id;
    const config = dreamConfig();
    const owner = "inngest-late-attempt";
    expect(await claimDreamRun(h.db, runId, owner, new Date(), config.staleRunMs)).toBe(true);
    // The retry, under the same lease, recorded the similar phase and beat after it.
    const retryBeat = new Date(Date.now() + 60_000);
    await h.db.dreamRun.update({ where: { id: runId }, data: { phase: "stale", heartbeatAt: retryBeat } });
    const beats: Date[] = [];
    const late = runDreamPhase({ db: h.db, sql: h.database.sql, config, stopping: () => true, onBeat: (at) => beats.push(at) }, runId, owner, "similar", Date.now());
    await expect(late).rejects.toBeInstanceOf(StoppedError);
    expect(beats).toEqual([]);
    expect(await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId }, select: { phase: true, heartbeatAt: true } })).toEqual({ phase: "stale", heartbeatAt: retryBeat });
  }, 120_000);

  /**
   * The stopped attempt's heartbeat timer went on beating while the phase finished its model call, over
   * the beats of the retry (which starts only once the stop has cut the step's request), and the step's
   * clear then matched that beat and wiped the retry's heartbeat.
   */
  it("beats no more once stopping", async () => {
    const { runId } = await pairRun();
    const config = { ...dreamConfig(), staleRunMs: 1000 };
    const owner = "inngest-stopping-attempt";
    expect(await claimDreamRun(h.db, runId, owner, new Date(), config.staleRunMs)).toBe(true);
    const retryBeat = new Date(Date.now() + 60_000);
    let stopped = false;
    meanwhile = async () => {
      stopped = true;
      await h.db.dreamRun.update({ where: { id: runId }, data: { heartbeatAt: retryBeat } });
      // More than a beat's interval (a quarter of the staleness) while the model still "thinks".
      await new Promise((resolve) => setTimeout(resolve, 700));
    };
    // Its beats before the stop are its own to write.
    const beatsAfterStop: Date[] = [];
    const attempt = runDreamPhase({ db: h.db, sql: h.database.sql, config, stopping: () => stopped, onBeat: (at) => stopped && beatsAfterStop.push(at) }, runId, owner, "similar", Date.now());
    await expect(attempt).rejects.toBeInstanceOf(StoppedError);
    expect(beatsAfterStop).toEqual([]);
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).heartbeatAt).toEqual(retryBeat);
  }, 120_000);

  /** The stop's mark was never taken back: after a new start in this process, every phase step ended at once as stopping. */
  it("runs the next attempt after a new start", async () => {
    await stopDreams();
    const { hubId, runId } = await pairRun();
    // As a server running dreams under Inngest starts (no in-process worker to take the run meanwhile).
    process.env.INNGEST_DEV = "1";
    try {
      await startDreams();
    } finally {
      delete process.env.INNGEST_DEV;
    }
    const { result } = await execute(hubId, runId);
    expect(result).toEqual({ status: "completed" });
    expect((await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).status).toBe("completed");
  }, 120_000);
});
