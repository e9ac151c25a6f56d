import { existsSync } from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";

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

/**
 * Runs the local model in a worker thread: tokenising, inference and pooling
 * leave the main thread, where HTTP and the embedded database run. Resolves
 * once the model is loaded (rejects when it cannot be). A worker that dies
 * fails its pending batches and is started again for the next one. The
 * thread keeps the process alive only while a batch is pending.
 */
export async function localEmbedderThread(script: string, options: LocalModelOptions): Promise<RunBatch> {
  const pending = new Map<number, { resolve(vectors: number[][]): void; reject(error: Error): void }>();
  let nextId = 0;
  let current: Promise<Worker> | undefined;

  const start = (): Promise<Worker> =>
    new Promise<Worker>((resolve, reject) => {
      const worker = new Worker(script, { workerData: options });
      let loaded = false;
      const failed = (error: Error) => {
        if (!loaded) reject(error);
        if (current && loaded) current = undefined;
        for (const request of pending.values()) request.reject(error);
        pending.clear();
      };
      worker.on("message", (message: Reply & { ready?: boolean }) => {
        if (!loaded) {
          if (message.ready) {
            loaded = true;
            worker.unref();
            resolve(worker);
          } else {
            reject(new Error(message.error ?? "the embedding worker failed to load the model"));
            void worker.terminate();
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
      worker.on("error", failed);
      worker.on("exit", (code) => failed(new Error(`the embedding worker exited (code ${code})`)));
    });

  current = start();
  current.catch(() => {
    current = undefined;
  });
  await current;

  return async (texts) => {
    if (!current) {
      current = start();
      current.catch(() => {
        current = undefined;
      });
    }
    const worker = await current;
    return new Promise<number[][]>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      worker.ref();
      worker.postMessage({ id, texts });
    });
  };
}
