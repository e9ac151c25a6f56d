import { getEmbedder } from "@/lib/ai/embedder.ts";
import { getDatabase } from "@/lib/db/database.ts";
import { startUploadSweeper } from "@/lib/uploads/sweep-uploads.ts";
import { onMemoryWrite } from "./after-memory-write.ts";
import { EmbeddedRunner } from "./embedded-runner.ts";
import { inngestEnabled, processingConfig } from "./processing-config.ts";
import { takeMemoriesToResend } from "./take-memories-to-resend.ts";

interface BackgroundState {
  started?: Promise<void>;
  runner?: EmbeddedRunner;
  /** Stops the write hook, the sweeps and the upload sweeper (not the runner itself). */
  stopFeeds?: () => void;
  /** Runners stopped at once whose jobs may still be ending (stoppedJobsEnded waits for them). */
  stopping?: Set<EmbeddedRunner>;
}

const globalForBackground = globalThis as unknown as { __engramBackground?: BackgroundState };
const state = (globalForBackground.__engramBackground ??= {});

/**
 * Starts background processing once per process (later calls return the
 * same promise): with Inngest configured, writes and a periodic sweep turn
 * into Inngest events; otherwise the embedded runner processes memories in
 * process. Either way the sweep resumes whatever a crash, restart or lost
 * event left pending. The embedding model loads in the background; a missing
 * model is logged once and never blocks writes.
 */
export function startBackgroundProcessing(): Promise<void> {
  state.started ??= start().catch((error) => {
    state.started = undefined;
    throw error;
  });
  return state.started;
}

/** The embedded runner, when that is the active mode (tests and the benchmark wait on it). */
export function backgroundRunner(): EmbeddedRunner | undefined {
  return state.runner;
}

/** Stops the runner at once and forgets it (tests; a later start begins afresh). */
export function stopBackgroundProcessing(): void {
  const runner = state.runner;
  forget();
  if (!runner) return;
  runner.stop();
  const stopping = (state.stopping ??= new Set());
  stopping.add(runner);
  void runner.idle().then(() => stopping.delete(runner));
}

/**
 * Resolves once the jobs of runners stopped at once have ended (at most `maxMs`): a stop aborts them,
 * but one still inside a statement ends a moment later, and a database closed under it made it log
 * after its test file had finished (tests close their database after this).
 */
export async function stoppedJobsEnded(maxMs = 10_000): Promise<void> {
  const runners = [...(state.stopping ?? [])];
  if (runners.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(runners.map((runner) => runner.idle())), new Promise<void>((resolve) => (timer = setTimeout(resolve, maxMs)))]);
  clearTimeout(timer);
}

/**
 * Graceful stop (the server's SIGTERM): no new jobs, and the embedded runner's jobs in progress
 * get up to graceMs to finish. Returns how many did not (resumed by a later sweep, here or in
 * another process). With Inngest, its own retries cover an interrupted step.
 */
export async function drainBackgroundProcessing(graceMs: number): Promise<number> {
  const runner = state.runner;
  forget();
  return runner ? runner.drain(graceMs) : 0;
}

/** Stops what feeds the runner (write hooks, sweeps, timers) and forgets the runner. */
function forget(): void {
  state.stopFeeds?.();
  Object.assign(state, { started: undefined, runner: undefined, stopFeeds: undefined });
}

async function start(): Promise<void> {
  if (process.env.ENGRAM_PROCESSING === "off") {
    console.warn("[engram] processing: disabled (ENGRAM_PROCESSING=off); new memories stay pending until it is enabled");
    return;
  }
  const config = processingConfig();
  const database = await getDatabase();
  void getEmbedder();
  if (inngestEnabled()) {
    const { inngest, MEMORY_PROCESS_EVENT } = await import("@/inngest/client.ts");
    const send = (ids: string[]) =>
      inngest.send(ids.map((id) => ({ name: MEMORY_PROCESS_EVENT, data: { id } }))).catch((error: unknown) => {
        // The row stays waiting; a sweep sends it again once it has waited the stale timeout.
        console.error(`[engram] processing: could not send ${ids.length} event(s) to Inngest`, error);
      });
    const unsubscribe = onMemoryWrite((memory) => void send([memory.id]));
    const sweep = async () => {
      const ids = await takeMemoriesToResend(database.prisma, config);
      if (ids.length) await send(ids);
    };
    void sweep().catch((error) => console.error("[engram] processing: sweep failed", error));
    const timer = setInterval(() => void sweep().catch((error) => console.error("[engram] processing: sweep failed", error)), config.sweepMs);
    timer.unref();
    // The upload sweep is the Inngest cron function sweep-uploads here.
    state.stopFeeds = () => {
      unsubscribe();
      clearInterval(timer);
    };
    console.log("[engram] processing: background jobs run on Inngest");
    return;
  }
  const stopUploadSweeper = startUploadSweeper(async () => (await getDatabase()).prisma);
  const runner = new EmbeddedRunner({ ...config, db: async () => (await getDatabase()).prisma, exclusiveDatabase: database.kind === "pglite" });
  const unsubscribe = onMemoryWrite((memory) => runner.enqueue(memory.id, memory.hubId));
  runner.start();
  state.runner = runner;
  state.stopFeeds = () => {
    unsubscribe();
    stopUploadSweeper();
  };
}
