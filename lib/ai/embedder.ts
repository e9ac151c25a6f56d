import { existsSync } from "node:fs";
import { availableParallelism } from "node:os";
import path from "node:path";
import { wholeNumberEnv } from "@/lib/config.ts";
import { embedInLengthGroups, type FeatureExtractor } from "./embed-in-length-groups.mjs";
import { glossHan } from "./gloss-han.ts";
import { mostlyOtherScript } from "./mostly-other-script.ts";
import { embedWorkerScript, localEmbedderThread, type LocalModelOptions, type RunBatch } from "./local-embedder-thread.ts";

/** Turns texts into normalised 384-dimensional vectors (cosine similarity = dot product). */
export interface Embedder {
  /** Stable identifier of provider + model; a change means stored vectors must be re-embedded. */
  id: string;
  dimensions: 384;
  /**
   * Whether the model can make sense of a text. The local model learned English only: text mostly
   * in another script, after Chinese is glossed into English, gets an embedding that says little.
   * Absent: any text.
   */
  reads?(text: string): Promise<boolean>;
  /**
   * `query`: a request is waiting for these vectors (a recall's question, an answer's candidate
   * sentences); the local model embeds them on a thread of their own, never behind indexing.
   * `document` (default): background indexing. The models here embed both kinds alike.
   */
  embed(texts: string[], kind?: "query" | "document"): Promise<number[][]>;
}

export type EmbeddingsStatus = "not_loaded" | "loading" | "ready" | "unavailable" | "disabled";

export interface EmbeddingsInfo {
  provider: "local" | "openai" | "none";
  model: string;
  status: EmbeddingsStatus;
  /** Why the embedder is unavailable (present only then). */
  reason?: string;
}

/** A model that cannot load for a reason anyone may be told (health is public); the message, for the log, may name paths. */
export class EmbedderUnavailable extends Error {
  constructor(
    message: string,
    readonly publicReason: string,
  ) {
    super(message);
    this.name = "EmbedderUnavailable";
  }
}

export const EMBEDDING_DIMENSIONS = 384;
export const LOCAL_MODEL_ID = "Xenova/all-MiniLM-L6-v2";
const LOCAL_MODEL_FILE = "onnx/model_quantized.onnx";
/** all-MiniLM-L6-v2 was trained on sequences of at most 256 word pieces; longer input only costs time. */
export const LOCAL_MAX_TOKENS = 256;
const LOCAL_BATCH_SIZE = 32;

interface EmbedderState {
  promise?: Promise<Embedder | null>;
  info: EmbeddingsInfo;
}

const globalForEmbedder = globalThis as unknown as { __engramEmbedder?: EmbedderState };

function state(): EmbedderState {
  globalForEmbedder.__engramEmbedder ??= { info: initialInfo() };
  return globalForEmbedder.__engramEmbedder;
}

function providerName(): EmbeddingsInfo["provider"] {
  const raw = (process.env.ENGRAM_EMBEDDINGS_PROVIDER || "local").toLowerCase();
  if (raw === "local" || raw === "openai" || raw === "none") return raw;
  throw new Error(`ENGRAM_EMBEDDINGS_PROVIDER must be local, openai or none, got "${raw}"`);
}

function initialInfo(): EmbeddingsInfo {
  const provider = providerName();
  if (provider === "none") return { provider, model: "", status: "disabled" };
  if (provider === "openai") return { provider, model: openAiModelName(), status: "not_loaded" };
  return { provider, model: LOCAL_MODEL_ID, status: "not_loaded" };
}

export function openAiModelName(): string {
  return process.env.ENGRAM_EMBEDDING_MODEL || "text-embedding-3-small";
}

/** Where the local model files live: $ENGRAM_MODEL_DIR or <project>/.cache/models. */
export function localModelDir(): string {
  return path.resolve(process.env.ENGRAM_MODEL_DIR || path.join(process.cwd(), ".cache", "models"));
}

export function localModelPresent(): boolean {
  return existsSync(path.join(localModelDir(), LOCAL_MODEL_ID, LOCAL_MODEL_FILE));
}

/**
 * The process-wide embedder, or null when no model can be loaded (recall then
 * runs lexical-only). Loaded once, lazily; kept on globalThis because Next
 * bundles route handlers and instrumentation separately.
 */
export function getEmbedder(): Promise<Embedder | null> {
  const s = state();
  s.promise ??= loadEmbedder(s);
  return s.promise;
}

/**
 * Graceful stop: waits (up to `ms`) for a model load in progress to end; never starts one. Exiting
 * while onnxruntime-node is still creating its session aborts the process (a native Napi::Error,
 * SIGABRT: seen in 1 of 10 stops issued right after start-up).
 */
export async function settleEmbedderLoad(ms: number): Promise<void> {
  const s = globalForEmbedder.__engramEmbedder;
  if (!s?.promise || s.info.status !== "loading") return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([s.promise.then(() => undefined, () => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** What /v1/health reports about embeddings; never triggers a load. */
export function embeddingsInfo(): EmbeddingsInfo {
  return { ...state().info };
}

/** Tests: install an embedder (or null for "none available"), or undefined to reload from the environment. */
export function setEmbedder(embedder: Embedder | null | undefined): void {
  if (embedder === undefined) {
    globalForEmbedder.__engramEmbedder = { info: initialInfo() };
    return;
  }
  globalForEmbedder.__engramEmbedder = {
    promise: Promise.resolve(embedder),
    info: embedder
      ? { provider: embedder.id.startsWith("openai:") ? "openai" : "local", model: embedder.id.replace(/^[^:]+:/, ""), status: "ready" }
      : { provider: "none", model: "", status: "unavailable", reason: "disabled by setEmbedder(null)" },
  };
}

async function loadEmbedder(s: EmbedderState): Promise<Embedder | null> {
  const info = s.info;
  if (info.provider === "none") {
    console.warn("[engram] embeddings: disabled (ENGRAM_EMBEDDINGS_PROVIDER=none); recall is lexical-only");
    return null;
  }
  s.info = { ...info, status: "loading" };
  try {
    const embedder =
      info.provider === "openai"
        ? (await import("./openai-embedder.ts")).createOpenAiEmbedder()
        : await createLocalEmbedder();
    s.info = { ...info, status: "ready" };
    return embedder;
  } catch (error) {
    const detail = error instanceof Error ? error.message.split("\n")[0] : String(error);
    // `reason` is on the public GET /v1/health: what is wrong, never the server's paths or a library's own error text (the log has those).
    const reason = error instanceof EmbedderUnavailable ? error.publicReason : "the model could not be loaded; the server log says why";
    s.info = { ...info, status: "unavailable", reason };
    const fix = info.provider === "local" ? " Run `npm run models` to install the local model." : "";
    console.error(`[engram] embeddings: ${info.provider} model ${info.model} is not loadable (${detail}); recall is lexical-only.${fix}`);
    return null;
  }
}

function threadCount(): number {
  const threads = wholeNumberEnv("ENGRAM_EMBED_THREADS", 0);
  if (threads > 0) return threads;
  // Every core (up to 4): the worker runs at a lower priority (ENGRAM_EMBED_NICE), so the event loop
  // and the embedded database still come first. Measured at rest on 2 cores, 100 memories of 5 KB
  // markdown: 2 threads ingest 6.4/s on PostgreSQL and 5.3/s embedded, 1 thread 4.3 and 4.1; a
  // client's create during the import stayed within its target; bench:load 111 req/s against 105.
  // (An earlier measurement on a heavily loaded machine had favoured 1 thread: 2.7 vs 1.9/s.)
  return Math.max(1, Math.min(4, availableParallelism()));
}

/**
 * ENGRAM_EMBED_MAX_TOKENS (default 256, the model's own limit): word pieces of a text the local model
 * reads. Chunks are up to ~320 pieces, so 256 already drops a long chunk's tail; 128 (what the model
 * was fine-tuned on) roughly halves the embedding work per chunk, and with it the cost of ingest,
 * at the price of vectors that describe only each chunk's first ~100 words (the lexical leg still
 * indexes every word).
 */
export function embedMaxTokens(): number {
  return wholeNumberEnv("ENGRAM_EMBED_MAX_TOKENS", LOCAL_MAX_TOKENS);
}

/**
 * ENGRAM_EMBED_NICE (default 10, 0 = off): how much lower than the server's own threads the local
 * model's worker thread runs (Linux niceness), so indexing never slows requests down.
 */
function embedNice(): number {
  return wholeNumberEnv("ENGRAM_EMBED_NICE", 10);
}

/**
 * The default: all-MiniLM-L6-v2 (int8 ONNX) through transformers.js + onnxruntime-node, in process:
 * in a worker thread when its script is present, else in the main thread.
 */
async function createLocalEmbedder(): Promise<Embedder> {
  // Never fetched at run time: transformers.js would take the hub's ONNX file unchecked, where
  // `npm run models` accepts only the published file's sha256 (or builds one it can pin).
  if (!localModelPresent()) {
    throw new EmbedderUnavailable(`model files not found under ${path.join(localModelDir(), LOCAL_MODEL_ID)}`, "the local model files are not installed (npm run models)");
  }
  const options: LocalModelOptions = {
    modelId: LOCAL_MODEL_ID,
    modelDir: localModelDir(),
    allowRemote: false,
    threads: threadCount(),
    maxTokens: embedMaxTokens(),
    nice: embedNice(),
  };
  const script = embedWorkerScript();
  let batcher: (kind: "query" | "document") => EmbeddingBatcher;
  if (script) {
    // Queries get a model thread of their own (one ONNX thread, normal priority): behind the indexing
    // thread a recall waited for the document batch running and then shared its own batch with 31
    // more chunks, 2.8 s at p50 during an import (bench:foreground, PGlite); now only for itself.
    const [documents, queries] = await Promise.all([
      localEmbedderThread(script, options),
      localEmbedderThread(script, { ...options, threads: 1, nice: 0 }),
    ]);
    const lanes = { document: new EmbeddingBatcher(documents, LOCAL_BATCH_SIZE), query: new EmbeddingBatcher(queries, LOCAL_BATCH_SIZE) };
    batcher = (kind) => lanes[kind];
  } else {
    const shared = new EmbeddingBatcher(await inThreadModel(options), LOCAL_BATCH_SIZE);
    batcher = () => shared;
  }
  return {
    id: `local:${LOCAL_MODEL_ID}`,
    dimensions: EMBEDDING_DIMENSIONS,
    // all-MiniLM-L6-v2 was trained on English sentence pairs only.
    reads: async (text) => !mostlyOtherScript(await glossHan(text)),
    // The tokenizer keeps the first LOCAL_MAX_TOKENS word pieces; the model never reads the rest of a
    // longer text, so it is not even copied to the worker (a word piece is rarely over 12 characters).
    // Chinese reaches it as English glosses (gloss-han.ts).
    embed: async (texts, kind = "document") =>
      batcher(kind).embed((await Promise.all(texts.map(glossHan))).map((text) => text.slice(0, LOCAL_MAX_TOKENS * 12)), kind),
  };
}

/** The model in the main thread (no worker script): same steps as lib/ai/local-embedder-worker.mjs. */
async function inThreadModel(options: LocalModelOptions): Promise<RunBatch> {
  const { env, pipeline, Tensor } = await import("@huggingface/transformers");
  env.localModelPath = options.modelDir;
  env.allowLocalModels = true;
  env.allowRemoteModels = options.allowRemote;
  env.cacheDir = options.modelDir;
  const extractor = await pipeline("feature-extraction", options.modelId, {
    dtype: "q8",
    session_options: { intraOpNumThreads: options.threads, interOpNumThreads: 1 },
  });
  const { tokenizer, model } = extractor;
  const groups = { tokenizer, model, Tensor } as unknown as FeatureExtractor;
  return async (batch) => (await embedInLengthGroups(groups, batch, options.maxTokens)).map((vector) => Array.from(vector));
}

interface EmbedRequest {
  texts: string[];
  vectors: number[][];
  /** Texts of this request not yet embedded, in input order. */
  next: number;
  done: number;
  resolve(vectors: number[][]): void;
  reject(error: unknown): void;
}

/** One text of a batch: which caller it came from, and where its vector goes. */
interface BatchItem {
  request: EmbedRequest;
  index: number;
  text: string;
}

function deliver(items: BatchItem[], vectors: number[][]): void {
  items.forEach((item, k) => {
    item.request.vectors[item.index] = vectors[k]!;
    if (++item.request.done === item.request.texts.length) item.request.resolve(item.request.vectors);
  });
}

/**
 * One inference at a time (parallel runs only fight over the same cores),
 * but every run fills its batch from all waiting callers: chunks of many
 * memories share a batch, which is where the throughput comes from. Queries
 * (recall) jump ahead of documents (background indexing), so a search
 * waits for at most the batch already running.
 */
export class EmbeddingBatcher {
  private readonly queries: EmbedRequest[] = [];
  private readonly documents: EmbedRequest[] = [];
  private running = false;

  constructor(
    private readonly runBatch: (texts: string[]) => Promise<number[][]>,
    private readonly batchSize: number,
  ) {}

  embed(texts: string[], kind: "query" | "document"): Promise<number[][]> {
    if (texts.length === 0) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      const request: EmbedRequest = { texts: texts.map((t) => t || " "), vectors: new Array(texts.length), next: 0, done: 0, resolve, reject };
      (kind === "query" ? this.queries : this.documents).push(request);
      // Started on the next turn of the event loop, so callers arriving together share the first batch.
      setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      for (;;) {
        const batch = this.take();
        if (batch.length === 0) break;
        // The local model runs a batch in groups of similar length (embed-in-length-groups.mjs). Its
        // int8 activations are quantised per model call, so a text's vector varies slightly with
        // its group-mates (cos 0.98–1.00 against the text embedded alone).
        try {
          deliver(batch, await this.runBatch(batch.map((item) => item.text)));
        } catch (error) {
          await this.retryApart(batch, error);
        }
      }
    } finally {
      this.running = false;
    }
  }

  /**
   * A failed batch shared by several callers (several memories' chunks) is run again caller by caller,
   * so a text the model cannot take fails only its own memory's attempt, not every memory beside it.
   * Two callers failing in a row say the model itself is failing (a dead or hung worker, a provider
   * down): the rest fail with them untried, so a failing model costs at most two more runs a batch.
   */
  private async retryApart(batch: BatchItem[], error: unknown): Promise<void> {
    const parts = new Map<EmbedRequest, BatchItem[]>();
    for (const item of batch) parts.set(item.request, [...(parts.get(item.request) ?? []), item]);
    let lastError = error;
    // A caller alone in its batch is not run again: its own texts are what failed.
    let failures = parts.size > 1 ? 0 : 2;
    for (const [request, items] of parts) {
      if (failures < 2) {
        try {
          deliver(items, await this.runBatch(items.map((item) => item.text)));
          failures = 0;
          continue;
        } catch (retryError) {
          lastError = retryError;
          failures++;
        }
      }
      request.next = request.texts.length; // drop its remaining texts
      request.reject(lastError);
    }
  }

  private take(): BatchItem[] {
    const batch: BatchItem[] = [];
    for (const list of [this.queries, this.documents]) {
      while (batch.length < this.batchSize && list.length > 0) {
        const request = list[0]!;
        while (batch.length < this.batchSize && request.next < request.texts.length) {
          batch.push({ request, index: request.next, text: request.texts[request.next]! });
          request.next++;
        }
        if (request.next >= request.texts.length) list.shift();
      }
    }
    return batch;
  }
}
