import { getEmbedder } from "@/lib/ai/embedder.ts";
import type { Db } from "@/lib/db/database.ts";
import { PROCESSING_STEPS, StaleJobError } from "./processing-steps.ts";

export interface ReembedOptions {
  /** Memories indexed at once; their chunks share embedding batches. */
  concurrency?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface ReembedResult {
  total: number;
  reembedded: number;
  /** Changed while being re-embedded: the runner indexes their new version. */
  skipped: number;
  /** The model (or the database) failed on them; they keep the chunks they had, and the log says why. */
  failed: number;
  embedder: string;
}

/**
 * The run stopped after FAILURES_IN_A_ROW failures one after another (the model or the database is
 * down). It carries what the run did up to then: the memories already re-embedded keep their new
 * chunks, and without the counts the summary could not say so.
 */
export class ReembedStopped extends Error {
  constructor(
    readonly result: ReembedResult,
    cause: unknown,
  ) {
    super(`stopped after ${FAILURES_IN_A_ROW} failures in a row: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "ReembedStopped";
  }
}

const PAGE = 200;
/**
 * Failures one after another that stop the run: then the model (or the database) is down, not one
 * memory's text, and going on would only fail every memory in turn.
 */
const FAILURES_IN_A_ROW = 20;
const indexStep = PROCESSING_STEPS.find((step) => step.name === "index")!;

/**
 * Re-chunks and re-embeds every processed memory with the current embedding
 * model (after a model or provider change, or once a model became available
 * for memories indexed lexical-only). Uses the pipeline's own index step, so
 * the result is exactly what processing would write. Pending and running
 * memories are left to the runner, and those of deleted hubs to their purge.
 */
export async function reembedMemories(db: Db, options: ReembedOptions = {}): Promise<ReembedResult> {
  const embedder = await getEmbedder();
  if (!embedder) throw new Error("No embedding model is available; see the log line above (npm run models installs the local one)");
  const concurrency = options.concurrency ?? 16;
  // Not those of a hub marked deleted (lib/hubs/delete-hub.ts): the purge is about to remove them, and
  // re-embedding a large one would spend the model on nothing (and write chunks the purge must delete).
  const where = { processingStatus: { in: ["done", "failed"] }, hub: { deletedAt: null } };
  let total = await db.memory.count({ where });
  let done = 0;
  let reembedded = 0;
  let skipped = 0;
  let failed = 0;
  let inARow = 0;
  let fatal: unknown;
  let cursor: string | undefined;
  for (;;) {
    const page = await db.memory.findMany({
      where: { ...where, ...(cursor && { id: { gt: cursor } }) },
      orderBy: { id: "asc" },
      take: PAGE,
      select: { id: true, hubId: true, version: true, contentHash: true },
    });
    if (page.length === 0) break;
    cursor = page.at(-1)!.id;
    // Memories that finished processing since the count are re-embedded too: counted again, the total
    // keeps progress from passing 100%. Only when the count was exceeded, so a steady run costs no extra count.
    if (done + page.length > total) total = done + page.length + (await db.memory.count({ where: { ...where, id: { gt: cursor } } }));
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(concurrency, page.length) }, async () => {
        while (next < page.length && fatal === undefined) {
          const memory = page[next++]!;
          try {
            await indexStep.run({ db, memory, now: () => new Date(), fresh: true });
            reembedded++;
            inARow = 0;
          } catch (error) {
            if (error instanceof StaleJobError) {
              skipped++;
            } else {
              // One memory the model refuses (a text it cannot take) must not keep every memory after it
              // from being re-embedded, run after run: it keeps its chunks and the run goes on.
              failed++;
              console.error(`[engram] reembed: memory ${memory.id} could not be re-embedded`, error);
              if (++inARow >= FAILURES_IN_A_ROW) fatal ??= error;
            }
          }
          done++;
          options.onProgress?.(done, total);
        }
      }),
    );
    // Thrown once every worker has stopped: nothing writes after the caller heard of the failure.
    if (fatal !== undefined) throw new ReembedStopped({ total: done, reembedded, skipped, failed, embedder: embedder.id }, fatal);
  }
  // Memories deleted during the run were never reached: the total is what the run went through.
  return { total: done, reembedded, skipped, failed, embedder: embedder.id };
}
