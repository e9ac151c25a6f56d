import { existsSync } from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";
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

interface Reply {
  id: number;
  data?: Float32Array;
  dims?: number;
  error?: string;
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

/** A started worker and the batches it owes an answer. */
interface Thread {
  worker: Worker;
  pending: Map<number, { resolve(vectors: number[][]): void; reject(error: Error): void }>;
  /** Fails its pending batches and ends it; the next batch starts a new worker. */
  fail(error: Error): void;
}

/**
 * Runs the local model in a worker thread: tokenising, inference and pooling
 * leave the main thread, where HTTP and the embedded database run. Resolves
 * once the model is loaded (rejects when it cannot be). A worker that dies,
 * or does not answer a batch within ENGRAM_MODEL_TIMEOUT_MS, fails its pending
 * batches and is replaced for the next one. The thread keeps the process alive
 * only while a batch is pending.
 */
export async function localEmbedderThread(script: string, options: LocalModelOptions): Promise<RunBatch> {
  let nextId = 0;
  let current: Promise<Thread> | undefined;

  const start = (): Promise<Thread> => {
    const started = new Promise<Thread>((resolve, reject) => {
      const worker = new Worker(script, { workerData: options });
      const pending: Thread["pending"] = new Map();
      let loaded = false;
      let ended = false;
      const fail = (error: Error) => {
        if (!loaded) reject(error);
        if (ended) return;
        ended = true;
        // Only this worker's slot: a replacement may already be starting.
        if (current === started) current = undefined;
        for (const request of pending.values()) request.reject(error);
        pending.clear();
        void worker.terminate();
      };
      worker.on("message", (message: Reply & { ready?: boolean }) => {
        if (!loaded) {
          if (message.ready) {
            loaded = true;
            worker.unref();
            resolve({ worker, pending, fail });
          } else {
            fail(new Error(message.error ?? "the embedding worker failed to load the model"));
          }
          return;
        }
        const request = pending.get(message.id);
        if (!request) return;
        pending.delete(message.id);
        if (pending.size === 0) worker.unref();
        if (message.error !== undefined || !message.data || !message.dims) {
          request.reject(new Error(message.error ?? "the embedding worker returned no vectors"));
          return;
        }
        const { data, dims } = message;
        request.resolve(Array.from({ length: data.length / dims }, (_, i) => Array.from(data.subarray(i * dims, (i + 1) * dims))));
      });
      worker.on("error", fail);
      worker.on("exit", (code) => fail(new Error(`the embedding worker exited (code ${code})`)));
    });
    current = started;
    started.catch(() => {
      if (current === started) current = undefined;
    });
    return started;
  };

  await start();

  return async (texts) => {
    const thread = await (current ?? start());
    // A worker stuck in the model (a native hang, a runaway loop) would hold every job waiting on it for
    // good, its lease renewed all the while: after the same cut-off as a remote provider's call it is
    // ended, the batch fails (its jobs are retried) and the next batch gets a new worker.
    const timeoutMs = modelTimeoutMs();
    return new Promise<number[][]>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => thread.fail(new Error(`the embedding worker did not answer within ${timeoutMs} ms; it was restarted`)), timeoutMs);
      thread.pending.set(id, {
        resolve: (vectors) => (clearTimeout(timer), resolve(vectors)),
        reject: (error) => (clearTimeout(timer), reject(error)),
      });
      thread.worker.ref();
      thread.worker.postMessage({ id, texts });
    });
  };
}
