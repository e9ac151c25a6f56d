import { getDatabase } from "@/lib/db/database.ts";
import { claimMemory, describeError, isPermanentError } from "@/lib/processing/process-memory.ts";
import { JobLease } from "@/lib/processing/job-lease.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { takeMemoriesToResend } from "@/lib/processing/take-memories-to-resend.ts";
import { failMemory, PROCESSING_STEPS, StaleJobError, type StepContext } from "@/lib/processing/processing-steps.ts";
import { inngest, MEMORY_PROCESS_EVENT } from "./client.ts";
import { chatSweepFunction, chatTurnFunction } from "./chat-functions.ts";
import { dreamRunFunction, dreamScheduleFunction } from "./dream-functions.ts";
import { sweepUploadsFunction } from "./upload-functions.ts";

const db = async () => (await getDatabase()).prisma;

/** Step retries per run; a step that fails on its last try ends the memory `failed`. */
const RETRIES = 4;

/**
 * Processes one memory: each step of the shared pipeline is an Inngest step,
 * so a retry resumes at the step that failed. The database stays the record:
 * the claim makes duplicate events harmless, and every write is discarded
 * if the content changed meanwhile.
 */
export const processMemoryFunction = inngest.createFunction(
  {
    id: "process-memory",
    name: "Process memory",
    triggers: [{ event: MEMORY_PROCESS_EVENT }],
    concurrency: { limit: 4 },
    retries: RETRIES,
    // No onFailure: it learns neither the attempt this run claimed nor whether the run still holds the
    // memory, so a stale run's failure (the sweeper re-sent a memory whose run looked stalled, and a
    // newer run claimed it) would fail the memory under its new owner. The step's last try records the
    // failure instead, fenced by the run's attempt like the embedded runner's (recordFailure); a run
    // that dies without recording leaves the memory `running`, and the sweeper resumes it.
  },
  async ({ event, step, attempt, maxAttempts }) => {
    const id = (event.data as { id?: string }).id;
    if (typeof id !== "string") return { status: "invalid" as const };
    const config = processingConfig();
    const claim = await step.run("claim", async () => {
      const now = new Date();
      return claimMemory(await db(), id, { ...config, now, staleBefore: new Date(now.getTime() - config.staleMs) });
    });
    if (!claim) return { status: "skipped" as const };
    // Each step writes as it goes: once `index` ran, the memory's chunks (with vectors) are stored.
    let indexed = false;
    for (const processingStep of PROCESSING_STEPS) {
      const result = await step.run(processingStep.name, async () => {
        const database = await db();
        // Renews the claim (the lease the sweep judges by), as the embedded runner's job does while it runs:
        // without it a run whose steps together took longer than the stale timeout was taken over, and
        // after the maximum attempts its memory ended failed ("interrupted") though every step succeeded.
        // Matching nothing means overtaken: this run looked stalled (one slow step, Inngest's backoff) and a
        // newer run claimed the memory with attempts + 1. That run finishes it; this one stops.
        const { count } = await database.memory.updateMany({
          where: { id: claim.memory.id, version: claim.memory.version, processingStatus: "running", processingAttempts: claim.attempt },
          data: { processingStartedAt: new Date() },
        });
        if (count === 0) return "stale" as const;
        // Renewed while the step runs too (job-lease.ts): the extract step waits here for the process's read
        // turn (one document, three images at a time) behind the other runs' reads, and renewed only as it
        // started, a wait past the stale timeout had the sweep re-send the memory and a second run take it over.
        const lease = new JobLease(db, config.staleMs);
        const signal = lease.hold(claim.memory.id, claim.attempt, claim.memory.version);
        const ctx: StepContext = { db: database, memory: claim.memory, now: () => new Date(), attempt: claim.attempt, signal };
        try {
          await processingStep.run(ctx);
          return "ok" as const;
        } catch (error) {
          // Lost while the step waited (its turn to read a document): the newer run owns the memory now.
          if (error instanceof StaleJobError || signal.aborted) return "stale" as const;
          // `attempt` counts this step's tries (0-based); the last one fails the memory instead of throwing.
          const lastTry = attempt >= (maxAttempts ?? RETRIES + 1) - 1;
          if (lastTry || isPermanentError(error)) {
            // A refusal by the provider itself is failed at once, as the embedded runner does (recordFailure).
            console.error(`[engram] processing: memory ${claim.memory.id} failed for good`, error);
            const failed = await failMemory(ctx, describeError(error), { indexed, attempt: claim.attempt });
            return failed ? ("failed" as const) : ("stale" as const);
          }
          // Visible on the memory while Inngest retries the step.
          await ctx.db.memory.updateMany({
            where: { id: claim.memory.id, version: claim.memory.version, processingStatus: "running", processingAttempts: claim.attempt },
            data: { processingError: describeError(error) },
          });
          throw error;
        } finally {
          lease.stop();
        }
      });
      if (result === "stale") return { status: "stale" as const };
      if (result === "failed") return { status: "failed" as const };
      if (processingStep.name === "index") indexed = true;
    }
    return { status: "done" as const };
  },
);

/** Safety net for lost events and dead workers: re-sends events for whatever the database says is waiting. */
export const sweepProcessingFunction = inngest.createFunction(
  { id: "sweep-processing", name: "Resume pending memory processing", triggers: [{ cron: "*/5 * * * *" }] },
  async ({ step }) => {
    // One step: its result is kept, so a retried send sends the same memories and marks none twice.
    const ids = await step.run("find-pending", async () => takeMemoriesToResend(await db(), processingConfig()));
    if (ids.length) await step.sendEvent("enqueue", ids.map((memoryId) => ({ name: MEMORY_PROCESS_EVENT, data: { id: memoryId } })));
    return { enqueued: ids.length };
  },
);

export const functions = [processMemoryFunction, sweepProcessingFunction, dreamRunFunction, dreamScheduleFunction, sweepUploadsFunction, chatTurnFunction, chatSweepFunction];
