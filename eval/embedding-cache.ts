import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { embedMaxTokens, LOCAL_MAX_TOKENS, type Embedder } from "@/lib/ai/embedder.ts";

/** Files whose code shapes a local model's vectors: a change to them means the cached vectors are stale. */
const LOCAL_EMBEDDING_CODE = ["lib/ai/embed-in-length-groups.mjs", "lib/ai/local-embedder-worker.mjs", "lib/ai/gloss-han.ts"];

/**
 * What a cached vector depends on besides its text: the embedder's id and, for the local model, the
 * code that runs it and ENGRAM_EMBED_MAX_TOKENS (a vector computed from fewer word pieces is another vector).
 */
export function embeddingCacheId(embedder: Embedder): string {
  if (!embedder.id.startsWith("local:")) return embedder.id;
  const code = createHash("sha256");
  for (const file of LOCAL_EMBEDDING_CODE) code.update(readFileSync(path.join(process.cwd(), file)));
  const maxTokens = embedMaxTokens();
  return `${embedder.id}-${code.digest("hex").slice(0, 8)}${maxTokens === LOCAL_MAX_TOKENS ? "" : `-max${maxTokens}`}`;
}

/**
 * Document embeddings for the eval's bulk corpora, computed in batches with the real embedder and
 * kept on disk (.cache/eval/<name>-<model>.bin, see embeddingCacheId) keyed by the text's hash, so a second run (or a
 * change to ranking code) does not embed 8,000 chunks again. A clean clone computes them once.
 */
export async function embedCached(embedder: Embedder, name: string, texts: string[], onProgress?: (done: number, total: number) => void): Promise<number[][]> {
  const dir = path.join(process.cwd(), ".cache", "eval");
  const model = embeddingCacheId(embedder).replace(/[^A-Za-z0-9._-]+/g, "_");
  const file = path.join(dir, `${name}-${model}.bin`);
  const dims = embedder.dimensions;
  const cache = new Map<string, Float32Array>();
  // Also read the parts other runs filled (`${name}-part…`), e.g. two processes sharing the work.
  const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith(`${name}-`) && f.endsWith(`-${model}.bin`)) : [];
  for (const found of files) {
    const buffer = readFileSync(path.join(dir, found));
    const record = 20 + dims * 4;
    for (let offset = 0; offset + record <= buffer.length; offset += record) {
      const key = buffer.subarray(offset, offset + 20).toString("hex");
      cache.set(key, new Float32Array(buffer.buffer.slice(buffer.byteOffset + offset + 20, buffer.byteOffset + offset + record)));
    }
  }
  const keys = texts.map((text) => createHash("sha1").update(text).digest("hex"));
  const missing = [...new Set(keys.filter((key) => !cache.has(key)))];
  const textByKey = new Map(keys.map((key, i) => [key, texts[i]!]));
  const save = () => {
    mkdirSync(dir, { recursive: true });
    const parts: Buffer[] = [];
    for (const [key, vector] of cache) parts.push(Buffer.from(key, "hex"), Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength));
    writeFileSync(file, Buffer.concat(parts));
  };
  const BATCH = 64;
  for (let i = 0; i < missing.length; i += BATCH) {
    const batch = missing.slice(i, i + BATCH);
    const vectors = await embedder.embed(batch.map((key) => textByKey.get(key)!), "document");
    batch.forEach((key, j) => cache.set(key, Float32Array.from(vectors[j]!)));
    onProgress?.(Math.min(i + BATCH, missing.length), missing.length);
    if ((i / BATCH) % 4 === 3) save();
  }
  if (missing.length > 0) save();
  return keys.map((key) => Array.from(cache.get(key)!));
}
