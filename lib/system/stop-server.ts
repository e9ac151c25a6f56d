import { settleEmbedderLoad } from "@/lib/ai/embedder.ts";
import { customBoardsIdle, releaseBoardClaims, stopCustomBoards } from "@/lib/boards/kick-custom-board.ts";
import { chatTurnsIdle, stopChatTurns } from "@/lib/chat/chat-turn-runner.ts";
import { closeDatabase, getDatabase } from "@/lib/db/database.ts";
import { stopEmbeddedMaintenance } from "@/lib/db/embedded-maintenance.ts";
import { stopDreams } from "@/lib/dreams/dream-runner.ts";
import { drainBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { flushUsage } from "@/lib/usage/count-usage.ts";
import { stopPeriodicTasks } from "./run-periodically.ts";

export interface StopServerResult {
  /** Background jobs still running when the grace period ended (resumed by a later sweep). */
  unfinishedJobs: number;
}

/**
 * The second half of a graceful stop (scripts/server.mjs calls it on SIGTERM or SIGINT, once the
 * HTTP server has stopped taking requests and the ones in progress have answered): background
 * jobs get up to graceMs to finish, the counters that are written in batches (access counts,
 * usage) are written, and the database is closed cleanly, so nothing acknowledged is lost and the
 * next start needs no recovery.
 */
export async function stopServer(options: { graceMs: number }): Promise<StopServerResult> {
  const deadline = Date.now() + options.graceMs;
  // First, so that what is waited for below is only the answers already on their way.
  stopCustomBoards();
  const dreamsStopped = stopDreams();
  stopChatTurns();
  // No prune starts from now on; one in progress finishes within the grace (each batch is short).
  const periodicStopped = stopPeriodicTasks(options.graceMs);
  const unfinishedJobs = await drainBackgroundProcessing(options.graceMs);
  // Chat turns, custom boards' answers and a dream run's current step in progress get what is left of the
  // grace; a turn cut short is resumed by the next sweep, a dream run by the next worker's. A board's answer
  // waits on the chat model and then writes: the database closed under it lost a dream run's refresh
  // (until the next run) and logged a failure on every stop.
  const rest = new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())).unref());
  await Promise.race([Promise.all([chatTurnsIdle(), customBoardsIdle(), dreamsStopped]), rest]);
  // A cooking board whose answer is cut short is asked by the next start-up at once, not after its claim expires.
  await releaseBoardClaims(await getDatabase()).catch((error: unknown) =>
    console.error("[engram] boards: start-up claims could not be given back; those boards are asked again after 3 × ENGRAM_ASK_MODEL_TIMEOUT_MS + 60 s", error),
  );
  await periodicStopped;
  await stopEmbeddedMaintenance();
  await flushAccess();
  // Counts waiting on a retry get a last try, due or not: they go with the process otherwise.
  await flushUsage({ retryAll: true });
  await closeDatabase();
  // A stop right after start-up can come while the model is still loading; exiting then aborts.
  // At least 5 s for it (a load takes 1-3 s at rest): scripts/server.mjs's last resort is 10 s past the grace.
  await settleEmbedderLoad(Math.max(deadline - Date.now(), 5_000));
  return { unfinishedJobs };
}
