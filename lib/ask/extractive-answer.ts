import { getEmbedder, type Embedder } from "@/lib/ai/embedder.ts";
import { embedQuery } from "@/lib/recall/embed-query.ts";
import type { RecalledMemory } from "@/lib/recall/load-recalled.ts";

/** Sources whose sentences are considered (recall's best first). */
const SOURCE_DEPTH = 5;
/** Sentences embedded per answer: bounds the model's work to one small batch (24 took the 10k-memory bench's ask p95 to 167 ms at rest; 16 = four from each of the first four sources). */
const MAX_SENTENCES = 16;
/** Sentence vectors kept (LRU): the same memories answer many questions, so most sentences are embedded once. */
const SENTENCE_CACHE_SIZE = 4096;
const globalForSentences = globalThis as unknown as { __engramSentenceVectors?: Map<string, number[]> };
const sentenceCache = (globalForSentences.__engramSentenceVectors ??= new Map());

/**
 * Kept per user, as query vectors are (embed-query.ts): a hit answers faster, and ask reports its
 * synthesis time, so a cache shared across accounts would tell anyone who asked with a guessed
 * sentence in their own memory whether it had just answered someone else's question.
 */
async function embedSentences(embedder: Embedder, texts: string[], userId: string): Promise<number[][]> {
  const keys = texts.map((text) => `${embedder.id}\u0000${userId}\u0000${text}`);
  const textOf = new Map(keys.map((key, i) => [key, texts[i]!]));
  const missing = [...new Set(keys.filter((key) => !sentenceCache.has(key)))];
  if (missing.length) {
    // "query": the asker is waiting (the request's lane, not indexing's).
    const vectors = await embedder.embed(missing.map((key) => textOf.get(key)!), "query");
    missing.forEach((key, i) => sentenceCache.set(key, vectors[i]!));
    while (sentenceCache.size > SENTENCE_CACHE_SIZE) sentenceCache.delete(sentenceCache.keys().next().value!);
  }
  return keys.map((key) => {
    const vector = sentenceCache.get(key)!;
    sentenceCache.delete(key);
    sentenceCache.set(key, vector);
    return vector;
  });
}
const MIN_SENTENCE_CHARS = 12;
const MAX_SENTENCE_CHARS = 400;
const MAX_PICKED = 4;
/**
 * Below this a sentence does not answer the question. Fitted by hand on the ask tests' own
 * questions (tests/ask.test.ts), not on any evaluation set: cosine of all-MiniLM-L6-v2 for an
 * unrelated sentence sits around 0–0.15, a paraphrase of the answer above 0.45.
 */
export const ANSWER_FLOOR = 0.3;
/** A picked sentence must be at least this fraction of the best one's score. */
const RELATIVE_FLOOR = 0.7;
const WEIGHTS = { similarity: 0.6, overlap: 0.3, source: 0.1 };

export const NOTHING_FOUND = "I could not find anything in your memories that answers this.";

export interface ExtractedSentence {
  text: string;
  /** 0-based index into the sources. */
  source: number;
  position: number;
  score: number;
}

const STOP = new Set(
  (
    "a an the and or but of to in on at for from by with about into over after before is are was were be been being do does did " +
    "how what why where when which who whom whose can could should would will shall may might must i we you he she it they our my " +
    "your their this that these those there here any some all not no yes if then than so as up out has have had tell me us show find " +
    "explain give list please know"
  ).split(" "),
);

/** Lower-cased content words, with a crude plural/ing strip so "deploys" meets "deploy". */
export function contentWords(text: string): Set<string> {
  const words = new Set<string>();
  for (const match of text.toLowerCase().matchAll(/[\p{L}\p{N}_][\p{L}\p{N}_.-]*[\p{L}\p{N}_]|[\p{L}\p{N}_]/gu)) {
    const word = match[0];
    if (STOP.has(word)) continue;
    words.add(word.length > 4 ? word.replace(/(ing|ed|es|s)$/, "") : word);
  }
  return words;
}

/** Splits a chunk into readable sentences (markdown headings and fences dropped, list items kept whole). */
export function splitSentences(text: string): string[] {
  const out: string[] = [];
  let inFence = false;
  for (const rawLine of text.split("\n")) {
    const line = rawLine.trim();
    if (line.startsWith("```")) {
      inFence = !inFence;
      continue;
    }
    if (inFence || !line || /^#{1,6}\s/.test(line) || /^[-*_|]{3,}$/.test(line)) continue;
    const item = line.replace(/^(?:[-*+]|\d+[.)])\s+/, "");
    for (const piece of item.split(/(?<=[.!?。！？])\s+(?=[\p{Lu}\p{N}"'(\[`])|(?<=[。！？])/u)) {
      const sentence = piece.trim();
      if (sentence.length >= MIN_SENTENCE_CHARS) out.push(sentence.length > MAX_SENTENCE_CHARS ? `${sentence.slice(0, MAX_SENTENCE_CHARS - 1)}…` : sentence);
    }
  }
  return out;
}

/**
 * The 2–4 sentences of the top sources that best answer the query (embedding
 * similarity + query-word overlap + the source's own relevance), in source
 * order. Empty when nothing clears the floor: the answer then says so.
 */
export async function extractSentences(query: string, sources: RecalledMemory[], userId: string): Promise<ExtractedSentence[]> {
  const candidates: Omit<ExtractedSentence, "score">[] = [];
  const seen = new Set<string>();
  for (const [source, memory] of sources.slice(0, SOURCE_DEPTH).entries()) {
    const sentences = splitSentences(memory.chunk_content);
    for (const [position, text] of sentences.entries()) {
      const key = text.toLowerCase();
      if (seen.has(key)) continue;
      seen.add(key);
      candidates.push({ text, source, position });
    }
  }
  // Fair share per source first, so one long memory cannot crowd out the rest.
  const perSource = Math.max(4, Math.floor(MAX_SENTENCES / Math.max(1, Math.min(SOURCE_DEPTH, sources.length))));
  const counts = new Map<number, number>();
  const bounded = candidates.filter((c) => {
    const n = counts.get(c.source) ?? 0;
    counts.set(c.source, n + 1);
    return n < perSource;
  }).slice(0, MAX_SENTENCES);
  if (bounded.length === 0) return [];

  const queryWords = contentWords(query);
  const embedder = await getEmbedder();
  let similarities: number[] | null = null;
  if (embedder) {
    try {
      const [queryVector, vectors] = await Promise.all([embedQuery(embedder, query, userId), embedSentences(embedder, bounded.map((c) => c.text), userId)]);
      similarities = vectors.map((v) => dot(queryVector, v));
    } catch (error) {
      console.error("[engram] ask: sentence embedding failed; word overlap only", error);
    }
  }
  const scored = bounded.map((c, i) => {
    const words = contentWords(c.text);
    let hits = 0;
    for (const w of queryWords) if (words.has(w)) hits += 1;
    const overlap = queryWords.size ? hits / queryWords.size : 0;
    const relevance = sources[c.source]?.relevance_score ?? 0;
    const similarity = similarities ? Math.max(0, similarities[i] ?? 0) : overlap;
    const score = WEIGHTS.similarity * similarity + WEIGHTS.overlap * overlap + WEIGHTS.source * relevance;
    return { ...c, score };
  });
  const ranked = [...scored].sort((a, b) => b.score - a.score);
  const best = ranked[0]!;
  if (best.score < ANSWER_FLOOR) return [];
  const picked: ExtractedSentence[] = [best];
  for (const candidate of ranked.slice(1)) {
    if (picked.length >= MAX_PICKED) break;
    // The second sentence is kept when it clears the floor; later ones must also be close to the best.
    const needed = picked.length < 2 ? ANSWER_FLOOR : Math.max(ANSWER_FLOOR, best.score * RELATIVE_FLOOR);
    if (candidate.score < needed) break;
    picked.push(candidate);
  }
  return picked.sort((a, b) => a.source - b.source || a.position - b.position);
}

/** "Sentence one. [1] Sentence two. [2]" — each sentence cited with its source's 1-based index. */
export function formatExtractive(sentences: ExtractedSentence[]): string {
  if (sentences.length === 0) return NOTHING_FOUND;
  return sentences.map((s) => `${s.text} [${s.source + 1}]`).join(" ");
}

function dot(a: number[], b: number[]): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!;
  return sum;
}
