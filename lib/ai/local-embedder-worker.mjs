// The local embedding model in its own thread. Tokenising, inference and
// pooling all run here, so the main thread (HTTP, and the embedded database,
// which runs on it) never waits for them. Plain ESM: Node loads this file
// directly, outside the Next bundle.
//
// workerData: { modelId, modelDir, allowRemote, threads, maxTokens, nice }
// in:  { id, texts }            out: { id, data: Float32Array (texts × dims) } | { id, error }
// first message out: { ready: true, dims } or { ready: false, error }
import { readlinkSync } from "node:fs";
import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import { embedInLengthGroups } from "./embed-in-length-groups.mjs";

const { modelId, modelDir, allowRemote, threads, maxTokens, nice } = workerData;

// Background work yields the CPU: this thread (and ONNX Runtime's threads, which inherit it when the
// model loads below) runs at a lower priority than the event loop and the database, so requests are
// not slowed by indexing; idle cores are still used in full. Linux only (a thread id is a pid there).
if (nice > 0) {
  try {
    setPriority(Number(readlinkSync("/proc/thread-self").split("/").pop()), nice);
  } catch {
    // not Linux, or not allowed: run at normal priority
  }
}

async function load() {
  const { env, pipeline, Tensor } = await import("@huggingface/transformers");
  env.localModelPath = modelDir;
  env.allowLocalModels = true;
  env.allowRemoteModels = allowRemote;
  env.cacheDir = modelDir;
  const extractor = await pipeline("feature-extraction", modelId, {
    dtype: "q8",
    session_options: { intraOpNumThreads: threads, interOpNumThreads: 1 },
  });
  const { tokenizer, model } = extractor;
  return async (texts) => {
    const vectors = await embedInLengthGroups({ tokenizer, model, Tensor }, texts, maxTokens);
    const dims = vectors[0]?.length ?? 0;
    const data = new Float32Array(vectors.length * dims);
    vectors.forEach((vector, i) => data.set(vector, i * dims));
    return { data, dims };
  };
}

try {
  const embed = await load();
  parentPort.postMessage({ ready: true });
  // One batch at a time: the caller's batcher already queues and groups requests.
  let chain = Promise.resolve();
  parentPort.on("message", ({ id, texts }) => {
    chain = chain.then(async () => {
      try {
        const { data, dims } = await embed(texts);
        parentPort.postMessage({ id, data, dims }, [data.buffer]);
      } catch (error) {
        parentPort.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
      }
    });
  });
} catch (error) {
  parentPort.postMessage({ ready: false, error: error instanceof Error ? error.message : String(error) });
}
