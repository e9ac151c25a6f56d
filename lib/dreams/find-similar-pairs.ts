import type { DreamConfig } from "./dream-config.ts";
import { classifyPair, type PairVerdict } from "./classify-pair.ts";
import type { TextFeatures } from "./text-features.ts";

export interface DreamMemory {
  id: string;
  title: string;
  /** Not updated_at: filing, archiving or restoring a memory moves that and leaves its text as old as it was. */
  contentChangedAt: Date;
  topicId: string | null;
  /** A kind the hub's owner excluded keeps the memory out of the run (dream-settings.ts). */
  kind: string;
  features: TextFeatures;
  embedding: Float32Array | undefined;
}

export interface SimilarPair {
  a: DreamMemory;
  b: DreamMemory;
  cosine: number;
  verdict: Exclude<PairVerdict, { kind: "distinct" }>;
}

/** Words indexed per memory: its rarest ones, so a pair must share distinctive words to be compared at all. */
const INDEXED_WORDS = 24;

export function dot(a: Float32Array, b: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!;
  return sum;
}

/**
 * Candidate pairs come from shared rare words (an inverted index), never from
 * all n² pairs; each candidate is then checked by embedding similarity and
 * classifyPair. Returns duplicates and contradictions, most similar first, and
 * how many candidates were compared.
 */
export function findSimilarPairs(memories: DreamMemory[], config: DreamConfig): { pairs: SimilarPair[]; candidates: number } {
  const n = memories.length;
  const df = new Map<string, number>();
  for (const m of memories) for (const w of m.features.words) df.set(w, (df.get(w) ?? 0) + 1);
  // Words in a large share of the hub say nothing about a pair; they are not indexed.
  const maxDf = Math.max(50, Math.ceil(n / 20));
  const postings = new Map<string, number[]>();
  const indexedCount = new Int32Array(n);
  memories.forEach((m, i) => {
    const words = [...m.features.words].filter((w) => { const d = df.get(w)!; return d >= 2 && d <= maxDf; });
    words.sort((x, y) => df.get(x)! - df.get(y)! || (x < y ? -1 : 1));
    const chosen = words.slice(0, INDEXED_WORDS);
    indexedCount[i] = chosen.length;
    for (const w of chosen) {
      let list = postings.get(w);
      if (!list) postings.set(w, (list = []));
      list.push(i);
    }
  });
  const pairs: SimilarPair[] = [];
  let candidates = 0;
  const shared = new Int32Array(n);
  const touched: number[] = [];
  memories.forEach((m, i) => {
    if (!m.embedding) return;
    for (const w of [...m.features.words]) {
      const list = postings.get(w);
      if (!list) continue;
      for (const j of list) {
        if (j <= i) continue;
        if (shared[j] === 0) touched.push(j);
        shared[j]! += 1;
      }
    }
    for (const j of touched) {
      const count = shared[j]!;
      shared[j] = 0;
      const other = memories[j]!;
      if (!other.embedding) continue;
      const need = Math.max(2, Math.ceil(config.candidateOverlap * Math.min(indexedCount[i]!, indexedCount[j]!)));
      if (count < need) continue;
      candidates++;
      const cosine = dot(m.embedding, other.embedding);
      if (cosine < Math.min(config.contradictionCosine, config.duplicateCosine)) continue;
      const verdict = classifyPair(m.features, other.features, cosine, config);
      if (verdict.kind !== "distinct") pairs.push({ a: m, b: other, cosine, verdict });
    }
    touched.length = 0;
  });
  pairs.sort((x, y) => y.cosine - x.cosine);
  return { pairs, candidates };
}

/** Orders a pair (older, newer): the newer content is the one kept. */
export function olderNewer(a: DreamMemory, b: DreamMemory): [DreamMemory, DreamMemory] {
  const t = a.contentChangedAt.getTime() - b.contentChangedAt.getTime();
  if (t !== 0) return t < 0 ? [a, b] : [b, a];
  return a.id < b.id ? [a, b] : [b, a];
}
