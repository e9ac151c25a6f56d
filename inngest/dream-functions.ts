import { getDatabase } from "@/lib/db/database.ts";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { DREAM_RUN_EVENT, dueHubs, pendingDreamRuns } from "@/lib/dreams/dream-runner.ts";
import { claimDreamRun, DREAM_PHASES, finishDreamRun, runDreamPhase } from "@/lib/dreams/run-dream.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { inngest } from "./client.ts";

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
    retries: 3,
  },
  async ({ event, step, runId: functionRunId }) => {
    const runId = (event.data as { run_id?: string }).run_id;
    if (typeof runId !== "string") return { status: "invalid" as const };
    const config = dreamConfig();
    // The lease is this function run's (Inngest's run id: the same for its steps and retries), not the
    // dream run's: a re-sent event starts a second function run, which must not hold it too.
    const claim = await step.run("claim", async () => {
      const owner = `inngest-${functionRunId}`;
      return (await claimDreamRun((await getDatabase()).prisma, runId, owner, new Date(), config.staleRunMs)) ? { owner } : null;
    });
    if (!claim) return { status: "skipped" as const };
    const { owner } = claim;
    const startedAt = Date.now();
    for (const phase of DREAM_PHASES) {
      await step.run(`phase-${phase}`, async () => {
        const database = await getDatabase();
        const run = await database.prisma.dreamRun.findUniqueOrThrow({ where: { id: runId }, select: { phase: true } });
        // A retried step whose phase already completed has nothing to do.
        if (DREAM_PHASES.indexOf(run.phase as (typeof DREAM_PHASES)[number]) > DREAM_PHASES.indexOf(phase) || run.phase === "done") return "done";
        await runDreamPhase({ db: database.prisma, sql: database.sql, config }, runId, owner, phase, startedAt);
        return "done";
      });
    }
    const status = await step.run("finish", async () => {
      const database = await getDatabase();
      return finishDreamRun({ db: database.prisma, sql: database.sql, config }, runId, owner, false);
    });
    return { status };
  },
);

/** Daily: a run for every hub written to since its last run, plus a resend of runs whose events were lost. */
export const dreamScheduleFunction = inngest.createFunction(
  { id: "dream-schedule", name: "Schedule dream runs", triggers: [{ cron: process.env.ENGRAM_DREAM_CRON || "0 3 * * *" }] },
  async ({ step }) => {
    const runs = await step.run("queue-due-hubs", async () => {
      const db = (await getDatabase()).prisma;
      const config = dreamConfig();
      const now = new Date();
      for (const hubId of await dueHubs(db, now, config.intervalHours, 1000)) await queueDreamRun(db, hubId, null, now);
      return pendingDreamRuns(db, now, config.staleRunMs);
    });
    if (runs.length) await step.sendEvent("run", runs.map((run) => ({ name: DREAM_RUN_EVENT, data: { hub_id: run.hubId, run_id: run.id } })));
    return { queued: runs.length };
  },
);
