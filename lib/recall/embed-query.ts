import type { Embedder } from "@/lib/ai/embedder.ts";

const CACHE_SIZE = 512;
const globalForCache = globalThis as unknown as { __engramQueryVectors?: Map<string, number[]> };
const cache = (globalForCache.__engramQueryVectors ??= new Map());

/**
 * The query's embedding. Agents repeat the same recalls (every session start,
 * every hook), so recent query vectors are kept (LRU) per embedder and per user:
 * a hit answers faster, so a cache shared across accounts would let anyone time
 * whether someone else had just asked the very same question.
 */
export async function embedQuery(embedder: Embedder, text: string, userId: string): Promise<number[]> {
  const key = `${embedder.id}\u0000${userId}\u0000${text}`;
  const hit = cache.get(key);
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const [vector] = await embedder.embed([text], "query");
  if (!vector) throw new Error("embedder returned no vector");
  cache.set(key, vector);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return vector;
}

/** Benchmarks: forget cached query vectors, so a repeated query is embedded again. */
export function clearQueryVectorCache(): void {
  cache.clear();
}
