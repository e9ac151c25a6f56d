import { customBoardsStopping, refreshBoardForDream } from "@/lib/boards/kick-custom-board.ts";
import { getDatabase } from "@/lib/db/database.ts";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { DREAM_RUN_EVENT, dreamsStopSignal, dueHubs, failRun, pendingDreamRuns, queueScheduledRuns, stillDueHubs } from "@/lib/dreams/dream-runner.ts";
import { claimDreamRun, DREAM_PHASES, finishDreamRun, LostLeaseError, OutOfTimeError, runBudgetStart, runDreamPhase, StoppedError, takeDreamAttempt } from "@/lib/dreams/run-dream.ts";
import { inngest } from "./client.ts";

/** What the claim step memoizes: the lease's owner and when the run's budget began (its first claim). */
interface Claim {
  owner: string;
  startedAt: number;
}

function isClaim(value: unknown): value is Claim {
  return typeof value === "object" && value !== null && typeof (value as Claim).owner === "string" && typeof (value as Claim).startedAt === "number";
}

const RETRIES = 3;

/**
 * One dream run: claim, then each phase as a step (a retry resumes at the
 * phase that failed; the run's own progress record makes a repeated phase
 * harmless), then the report. At most one run per hub at a time.
 */
export const dreamRunFunction = inngest.createFunction(
  {
    id: "dream-run",
    name: "Dream run",
    triggers: [{ event: DREAM_RUN_EVENT }],
    concurrency: [{ key: "event.data.hub_id", limit: 1 }],
    retries: RETRIES,
  },
  async ({ event, step, runId: functionRunId, attempt, maxAttempts }) => {
    const runId = (event.data as { run_id?: string }).run_id;
    if (typeof runId !== "string") return { status: "invalid" as const };
    const config = dreamConfig();
    // The lease is this function run's (Inngest's run id: the same for its steps and retries), not the
    // dream run's: a re-sent event starts a second function run, which must not hold it too. The claim
    // also fixes when the run's budget began (its first claim), memoized with the step: not each step's.
    const self = `inngest-${functionRunId}`;
    const claimAs = async (takeOverFrom?: string): Promise<Claim | null> => {
      const now = new Date();
      const db = (await getDatabase()).prisma;
      if (!(await claimDreamRun(db, runId, self, now, config.staleRunMs, takeOverFrom))) return null;
      // The run's budget began at its first claim, whichever worker or function run made it (see runBudgetStart).
      const run = await db.dreamRun.findUnique({ where: { id: runId }, select: { startedAt: true } });
      return { owner: self, startedAt: runBudgetStart(run ?? { startedAt: null }, now) };
    };
    const memoized: unknown = await step.run("claim", () => claimAs());
    // A function run that claimed before a deploy replays the claim as it was memoized then: `true`, the
    // lease held under the dream run's id, or `{ owner }` without its start. Its phases would run under
    // an undefined owner (every batch a LostLeaseError) or without a budget: it claims again, once, taking
    // over the lease its old claim took.
    const claim = isClaim(memoized)
      ? memoized
      : memoized
        ? await step.run("claim-again", () => claimAs(memoized === true ? `inngest-${runId}` : undefined))
        : null;
    if (!claim) return { status: "skipped" as const };
    const { owner, startedAt } = claim;
    // A step that fails on its last try ends the run failed, as the in-process worker does (no
    // onFailure: it would not know whether this function run still holds the lease). Left running, its
    // heartbeat went stale and the schedule sent it again, to fail the same way, while every trigger of
    // the hub answered `already_running` with it.
    // Everything a step does is inside its try, the database's first use included: a read before it that
    // failed on the last try left the run running all the same.
    // `token`: the step attempt's own (takeDreamAttempt), when it got that far.
    const failOnLastTry = async (error: unknown, token: string | undefined) => {
      if (attempt + 1 < (maxAttempts ?? RETRIES + 1)) return;
      console.error(`[engram] dreams: run ${runId} failed on its last try`, error);
      // The database may be what failed: then the run stays running for the schedule to resend, and the
      // step fails with its own error rather than this one.
      await getDatabase()
        .then((database) => failRun(database.prisma, runId, owner, token))
        .catch((failed: unknown) => console.error(`[engram] dreams: run ${runId} could not be ended failed`, failed));
    };
    let timedOut = false;
    let lost = false;
    for (const phase of DREAM_PHASES) {
      const outcome = await step.run(`phase-${phase}`, async () => {
        // The last heartbeat this attempt wrote: none yet. The one read at its start is the claim's or an
        // earlier step's, which its retry (under the same lease) may not have beaten over yet.
        let beat: Date | undefined;
        // This attempt's own hold on the run: a retry of the step (the same lease) takes it over, and
        // this attempt's writes, should it go on (its request cut while a model answered), match nothing.
        // Stopped before its take: the hold it found, which its stop's clear goes by.
        let token: string | null | undefined;
        try {
          const database = await getDatabase();
          const run = await database.prisma.dreamRun.findUnique({ where: { id: runId }, select: { phase: true, heartbeatAt: true, attemptToken: true } });
          // Gone with its hub (a purge's cascade): nothing is left to run, and a retry would find the same.
          if (!run) return "lost";
          // A retried step whose phase already completed has nothing to do.
          if (DREAM_PHASES.indexOf(run.phase as (typeof DREAM_PHASES)[number]) > DREAM_PHASES.indexOf(phase) || run.phase === "done") return "done";
          // Before the take: a stopping attempt that took the run took it from a retry already running.
          const signal = dreamsStopSignal();
          if (signal.aborted) {
            // Stopped before it began: this step's request is still open, so no retry of it runs yet,
            // and the heartbeat it found is cleared for the next worker as one of its own.
            beat = run.heartbeatAt ?? undefined;
            token = run.attemptToken;
            throw new StoppedError(`dream run ${runId}: the worker is stopping`);
          }
          // `attempt` is the request's, read once per handler call: with checkpointing (on by default in
          // v4) later steps run eagerly in the same request, but only on its first attempt. Since 4.5 the
          // SDK ends a request (attempt > 0) after the one step it ran (engine.js attemptCheckpointAndResume),
          // so no step carries a retry's number it was not itself run under.
          token = (await takeDreamAttempt(database.prisma, runId, owner, { step: DREAM_PHASES.indexOf(phase), attempt })) ?? undefined;
          if (token === undefined) return "lost";
          await runDreamPhase({ db: database.prisma, sql: database.sql, config, signal, onBeat: (at) => (beat = at), attempt: token }, runId, owner, phase, startedAt);
        } catch (error) {
          // This process is stopping (see dreamsStopSignal): the run is no failure, and stays running for
          // the step's retry; its heartbeat cleared, as the in-process worker leaves it, so a resend of the
          // schedule takes it at once should this function run have no retry left. Only the heartbeat this
          // attempt left: its retry holds the same lease, may be running by now (the stop cut this step's
          // request), and its heartbeat cleared, any worker's sweep took the run from under it.
          if (error instanceof StoppedError) {
            const mine = beat;
            await getDatabase()
              .then(async (database) => {
                if (mine !== undefined) await database.prisma.dreamRun.updateMany({ where: { id: runId, status: "running", leaseOwner: owner, attemptToken: token, heartbeatAt: mine }, data: { heartbeatAt: null } });
              })
              .catch((failed: unknown) => console.error(`[engram] dreams: run ${runId} could not be left for the next worker`, failed));
            throw error;
          }
          // Out of the run's budget: it ends partial_failed (the next run continues), as with the in-process worker.
          if (error instanceof OutOfTimeError) return "out_of_time";
          // Its hub purged, or its lease taken over by a worker that found it stale: that one finishes
          // it, or nothing is left to finish. The in-process worker stops quietly the same way.
          if (error instanceof LostLeaseError) return "lost";
          await failOnLastTry(error, token ?? undefined);
          throw error;
        }
        return "done";
      });
      if (outcome === "lost") lost = true;
      if (outcome === "out_of_time") timedOut = true;
      if (lost || timedOut) break;
    }
    if (lost) return { status: "lost" as const };
    const status = await step.run("finish", async () => {
      let token: string | undefined;
      try {
        const database = await getDatabase();
        token = (await takeDreamAttempt(database.prisma, runId, owner, { step: DREAM_PHASES.length, attempt })) ?? undefined;
        if (token === undefined) return "lost";
        return await finishDreamRun({ db: database.prisma, sql: database.sql, config, attempt: token }, runId, owner, timedOut);
      } catch (error) {
        if (error instanceof LostLeaseError) return "lost";
        await failOnLastTry(error, token);
        throw error;
      }
    });
    if (status === "lost") return { status };
    // The hub's custom boards, one step each: one step for all held a worker for up to ten model answers
    // (ENGRAM_ASK_MODEL_TIMEOUT_MS each), and a retry asked every board again.
    // Not once this process's graceful stop has begun, as the in-process worker's queue takes no board then
    // (the hub's next dream run asks them): the steps, run one after another in the request Inngest keeps
    // open, asked every board through the stop and into the database it closes.
    const boards = await step.run("boards", async () => {
      if (customBoardsStopping()) return [];
      const database = await getDatabase();
      // The run is finished by now: a hub purged since took its row with it, and has no boards to ask
      // (read with findUniqueOrThrow, that purge failed the step and, after its retries, the function run).
      const run = await database.prisma.dreamRun.findUnique({ where: { id: runId }, select: { hubId: true } });
      if (!run) return [];
      const rows = await database.prisma.customBoard.findMany({ where: { hubId: run.hubId, status: { not: "paused" } }, orderBy: { id: "asc" }, select: { id: true } });
      return rows.map((row) => row.id);
    });
    for (const boardId of boards) {
      await step.run(`board-${boardId}`, async () => {
        if (customBoardsStopping()) return null;
        // Its failures are logged by the refresh (the hub's next dream run asks the board again).
        await refreshBoardForDream(boardId, runId);
        return null;
      });
    }
    return { status };
  },
);

/** Hubs the daily schedule queues at most, and runs it sends at most. */
const SCHEDULE_HUBS = 1000;

/** Daily: a run for every hub written to since its last run, plus a resend of runs whose events were lost. */
export const dreamScheduleFunction = inngest.createFunction(
  { id: "dream-schedule", name: "Schedule dream runs", triggers: [{ cron: process.env.ENGRAM_DREAM_CRON || "0 3 * * *" }] },
  async ({ step }) => {
    // The due hubs, picked in a step of their own: memoized, a retry of the queuing step below queues
    // the same hubs, and finds the runs an earlier attempt queued before it failed (already_running) as
    // its own. Told apart from older waiting runs by the cron event's timestamp (Inngest's clock) against
    // their created_at (this server's), those runs went behind every older one once the clocks drifted.
    const due = await step.run("pick-due-hubs", async () => dueHubs((await getDatabase()).prisma, new Date(), dreamConfig().intervalHours, SCHEDULE_HUBS));
    const runs = await step.run("queue-due-hubs", async () => {
      const db = (await getDatabase()).prisma;
      const config = dreamConfig();
      const now = new Date();
      // Not kicked one by one: the runs queued here are among those sent below, and kicked too, each was
      // sent twice (two function runs per run), by up to 1,000 requests to Inngest inside this one step.
      // A picked hub with a run already (an earlier attempt's, or a member's trigger since the pick) has
      // that run sent with the others: none had one when picked.
      // A hub purged since it was read just above is passed over (a retry replays the same hubs).
      const picked = await queueScheduledRuns(db, await stillDueHubs(db, due, now, config.intervalHours), () => now, { kick: false });
      // As many as it may have queued: taking the in-process sweep's 100 (it sweeps every minute, this
      // once a day), the rest waited for the next day's, and 1,000 due hubs were dreamt every ten days.
      // The picked hubs' runs first, then those waiting: taken oldest first alone, this step's own came
      // last, and behind 400 older waiting runs 400 of the hubs it queued waited a day for their event.
      const taken = new Set(picked.map((run) => run.id));
      const waiting = await pendingDreamRuns(db, now, config.staleRunMs, SCHEDULE_HUBS);
      return [...picked, ...waiting.filter((run) => !taken.has(run.id))].slice(0, SCHEDULE_HUBS);
    });
    if (runs.length) await step.sendEvent("run", runs.map((run) => ({ name: DREAM_RUN_EVENT, data: { hub_id: run.hubId, run_id: run.id } })));
    return { queued: runs.length };
  },
);
