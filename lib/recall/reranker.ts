import { rerank, type RerankingModel } from "ai";
import { wholeNumberEnv } from "@/lib/config.ts";

type RerankingModelV3 = Exclude<RerankingModel, string>;

/**
 * A second-stage scorer that reads query and passage together (a
 * cross-encoder or an LLM judge). Scores are 0..1 relevance per document.
 * Any implementation plugs in through `setReranker`; the built-in one calls an
 * HTTP reranking endpoint (Cohere / Jina / vLLM / Infinity `/rerank` shape)
 * through the AI SDK's `rerank()`.
 */
export interface Reranker {
  id: string;
  rerank(query: string, documents: string[], abortSignal: AbortSignal): Promise<number[]>;
}

export type RerankOutcome = { reranked: true; scores: number[] } | { reranked: false; reason: string };

/** Default time the reranker may add to a recall; configurable with ENGRAM_RERANK_BUDGET_MS. */
export const RERANK_BUDGET_MS = 150;

interface RerankerState {
  reranker: Reranker | null | undefined;
  /** Moving average of recent call times: a reranker that is consistently slow is skipped up front. */
  averageMs: number | undefined;
  /** While set, calls are skipped until this time (after a failure), so an outage costs one timeout, not one per query. */
  pausedUntil: number;
}

const globalForReranker = globalThis as unknown as { __engramReranker?: RerankerState };

function state(): RerankerState {
  globalForReranker.__engramReranker ??= { reranker: undefined, averageMs: undefined, pausedUntil: 0 };
  return globalForReranker.__engramReranker;
}

export function rerankBudgetMs(): number {
  return wholeNumberEnv("ENGRAM_RERANK_BUDGET_MS", RERANK_BUDGET_MS);
}

/** Tests and embedders of Engram: install a reranker (null: none), or undefined to re-read the environment. */
export function setReranker(reranker: Reranker | null | undefined): void {
  globalForReranker.__engramReranker = { reranker, averageMs: undefined, pausedUntil: 0 };
}

/** The configured reranker, or null when none is (ENGRAM_RERANK_URL unset). */
export function getReranker(): Reranker | null {
  const s = state();
  if (s.reranker === undefined) s.reranker = rerankerFromEnvironment();
  return s.reranker;
}

function rerankerFromEnvironment(): Reranker | null {
  const url = process.env.ENGRAM_RERANK_URL?.trim();
  if (!url) return null;
  return createHttpReranker({
    baseUrl: url,
    model: process.env.ENGRAM_RERANK_MODEL?.trim() || "rerank",
    apiKey: process.env.ENGRAM_RERANK_API_KEY?.trim() || undefined,
  });
}

/** A reranking model for any endpoint that takes `{ model, query, documents, top_n }` at `<baseUrl>/rerank`. */
export function httpRerankingModel(options: { baseUrl: string; model: string; apiKey?: string }): RerankingModelV3 {
  const endpoint = `${options.baseUrl.replace(/\/+$/, "")}/rerank`;
  return {
    specificationVersion: "v3",
    provider: "engram-http-rerank",
    modelId: options.model,
    async doRerank({ documents, query, topN, abortSignal, headers }) {
      const texts = documents.type === "text" ? documents.values : documents.values.map((value) => JSON.stringify(value));
      const response = await fetch(endpoint, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(options.apiKey && { authorization: `Bearer ${options.apiKey}` }),
          ...Object.fromEntries(Object.entries(headers ?? {}).filter((entry): entry is [string, string] => entry[1] !== undefined)),
        },
        body: JSON.stringify({ model: options.model, query, documents: texts, top_n: topN ?? texts.length, return_documents: false }),
        signal: abortSignal,
      });
      if (!response.ok) throw new Error(`rerank endpoint answered ${response.status}`);
      const body = (await response.json()) as { results?: { index: number; relevance_score?: number; score?: number }[] };
      if (!Array.isArray(body.results)) throw new Error("rerank endpoint returned no results array");
      const ranking = body.results
        .filter((r) => Number.isInteger(r.index) && r.index >= 0 && r.index < texts.length)
        .map((r) => ({ index: r.index, relevanceScore: Number(r.relevance_score ?? r.score ?? 0) }))
        .sort((a, b) => b.relevanceScore - a.relevanceScore);
      return { ranking, response: { modelId: options.model, body } };
    },
  };
}

export function createHttpReranker(options: { baseUrl: string; model: string; apiKey?: string }): Reranker {
  const model = httpRerankingModel(options);
  return {
    id: `http:${options.model}`,
    async rerank(query, documents, abortSignal) {
      const result = await rerank({ model, query, documents, maxRetries: 0, abortSignal });
      const scores = new Array<number>(documents.length).fill(0);
      for (const entry of result.ranking) scores[entry.originalIndex] = squash(entry.score);
      return scores;
    },
  };
}

/** Cross-encoders answer in 0..1 (probabilities) or as raw logits; keep 0..1 either way. */
function squash(score: number): number {
  if (!Number.isFinite(score)) return 0;
  return score >= 0 && score <= 1 ? score : 1 / (1 + Math.exp(-score));
}

/**
 * Reranks within the time budget, or says honestly why it did not:
 * `disabled_by_request`, `no_reranker_configured`, `over_budget` (recent calls
 * were slower than the budget), `timeout`, `unavailable` (a recent failure),
 * `error`.
 */
export async function rerankWithinBudget(query: string, documents: string[], options: { noRerank: boolean }): Promise<RerankOutcome> {
  if (options.noRerank) return { reranked: false, reason: "disabled_by_request" };
  const reranker = getReranker();
  if (!reranker) return { reranked: false, reason: "no_reranker_configured" };
  if (documents.length === 0) return { reranked: false, reason: "no_candidates" };
  const s = state();
  const budget = rerankBudgetMs();
  if (Date.now() < s.pausedUntil) return { reranked: false, reason: "unavailable" };
  if (s.averageMs !== undefined && s.averageMs > budget) {
    // Let one call through now and then so a reranker that got faster is noticed.
    s.averageMs *= 0.9;
    return { reranked: false, reason: "over_budget" };
  }
  const started = performance.now();
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), budget);
  try {
    const scores = await reranker.rerank(query, documents, controller.signal);
    const elapsed = performance.now() - started;
    s.averageMs = s.averageMs === undefined ? elapsed : s.averageMs * 0.7 + elapsed * 0.3;
    if (scores.length !== documents.length) return { reranked: false, reason: "error" };
    return { reranked: true, scores };
  } catch (error) {
    const timedOut = controller.signal.aborted;
    s.averageMs = Math.max(s.averageMs ?? 0, budget * 1.2);
    if (!timedOut) {
      s.pausedUntil = Date.now() + 30_000;
      console.warn(`[engram] recall: reranker ${reranker.id} failed (${error instanceof Error ? error.message : String(error)}); skipping it for 30 s`);
    }
    return { reranked: false, reason: timedOut ? "timeout" : "error" };
  } finally {
    clearTimeout(timer);
  }
}
