import { existsSync } from "node:fs";
import path from "node:path";
import { WorkerLane, type WorkerReply } from "@/lib/worker-lane.ts";
import { modelTimeoutMs } from "./model-timeout.ts";

/** What the local model needs to load: the same in a worker thread and in the main thread. */
export interface LocalModelOptions {
  modelId: string;
  modelDir: string;
  allowRemote: boolean;
  threads: number;
  maxTokens: number;
  /** Niceness of the worker thread (0 = normal priority). */
  nice?: number;
}

export type RunBatch = (texts: string[]) => Promise<number[][]>;

interface Reply extends WorkerReply {
  data?: Float32Array;
  dims?: number;
}

/**
 * The worker script (plain ESM, loaded by Node outside the Next bundle), or
 * null when it is not there (an unusual deployment layout) or disabled with
 * ENGRAM_EMBED_WORKER=0: the model then runs in the main thread.
 */
export function embedWorkerScript(): string | null {
  if (process.env.ENGRAM_EMBED_WORKER === "0") return null;
  const script = path.join(process.cwd(), "lib", "ai", "local-embedder-worker.mjs");
  return existsSync(script) ? script : null;
}

/**
 * Runs the local model in a worker thread: tokenising, inference and pooling
 * leave the main thread, where HTTP and the embedded database run. Resolves
 * once the model is loaded (rejects when it cannot be). A worker that dies,
 * or does not answer a batch within ENGRAM_MODEL_TIMEOUT_MS, fails its batch
 * and is replaced for the next one. The thread keeps the process alive only
 * while a batch runs.
 */
export async function localEmbedderThread(script: string, options: LocalModelOptions): Promise<RunBatch> {
  const lane = new WorkerLane<Reply>({
    script,
    workerOptions: () => ({ workerData: options }),
    // A worker stuck in the model (a native hang, a runaway loop) would hold every job waiting on it for
    // good, its lease renewed all the while: after the same cut-off as a remote provider's call it is
    // ended, the batch fails (its jobs are retried) and the next batch gets a new worker.
    timeoutMs: modelTimeoutMs,
    timedOut: (ms) => new Error(`the embedding worker did not answer within ${ms} ms; it was restarted`),
    loadFailed: (reply) => new Error(reply.error ?? "the embedding worker failed to load the model"),
    crashed: (error) => error,
    exited: (code) => new Error(`the embedding worker exited (code ${code})`),
  });
  await lane.start();
  return async (texts) => {
    const { data, dims } = await lane.run({ texts });
    if (!data || !dims) throw new Error("the embedding worker returned no vectors");
    return Array.from({ length: data.length / dims }, (_, i) => Array.from(data.subarray(i * dims, (i + 1) * dims)));
  };
}
