import type { AuthContext } from "@/lib/api/context.ts";
import { chatModel } from "@/lib/ai/chat-model.ts";
import { estimateTokens } from "@/lib/processing/estimate-tokens.ts";
import type { RecalledMemory } from "@/lib/recall/load-recalled.ts";
import { recallMemories } from "@/lib/recall/recall-memories.ts";
import { ASK_DEFAULT_LIMIT, type AskBody } from "./ask-fields.ts";
import { extractSentences, NOTHING_FOUND } from "./extractive-answer.ts";
import { buildPrompt, modelFallbackReason, ModelTimeoutError, modelTimeoutApiError, parseCitations, streamModelAnswer } from "./model-answer.ts";

export interface AskInput extends AskBody {
  /** X-Hub-ID: a ranking hint, as for recall (ask searches every readable hub). */
  preferred_hub_id?: string;
  /** Search only these hubs (still narrowed to what the credential reaches): MCP's consented hubs. */
  hub_ids?: string[];
  /** As recall's: false when no person reads the answer now. */
  count_access?: boolean;
}

export interface AskCitation {
  index: number;
  memory_id: string;
  title: string;
  kind: string;
}

export interface AskResult {
  answer: string;
  citations: AskCitation[];
  sources: RecalledMemory[];
  metadata: {
    model: string;
    answer_tokens: number;
    retrieval_latency_ms: number;
    synthesis_latency_ms: number;
    total_latency_ms: number;
    /** Present when the chat model failed before writing anything and the extractive answer stood in. */
    fallback_reason?: string;
  };
}

export interface AskDone {
  tokens: number;
  model: string;
  citations: AskCitation[];
  answer: string;
  synthesisMs: number;
  fallbackReason?: string;
}

/** Retrieval done, answer pending: the stream route sends `sources` before the answer exists. */
export interface AskRun {
  sources: RecalledMemory[];
  retrievalMs: number;
  /**
   * Answer text in pieces; the generator's return value is the summary for `done`. `buffered`: the
   * caller shows nothing before the end (the JSON form), so a model failing midway can still be
   * replaced by the extractive answer.
   */
  answer(signal?: AbortSignal, options?: { buffered?: boolean }): AsyncGenerator<string, AskDone>;
}

const round = (ms: number) => Math.round(ms * 10) / 10;

/** Retrieves with recall (the same ranking, floor and access rules), then prepares the answer. */
export async function startAsk(ctx: AuthContext, input: AskInput): Promise<AskRun> {
  const started = performance.now();
  const recalled = await recallMemories(ctx, {
    query: input.query,
    limit: input.limit ?? ASK_DEFAULT_LIMIT,
    topic_id: input.topic_id,
    no_rerank: input.no_rerank,
    preferred_hub_id: input.preferred_hub_id,
    ...(input.hub_ids && { hub_ids: input.hub_ids }),
    ...(input.count_access === false && { count_access: false }),
  });
  const sources = recalled.memories;
  const retrievalMs = performance.now() - started;
  return { sources, retrievalMs, answer: (signal, options) => writeAnswer(ctx, input, sources, signal, options?.buffered ?? false) };
}

async function* writeAnswer(
  ctx: Pick<AuthContext, "user" | "requestId">,
  input: AskInput,
  sources: RecalledMemory[],
  signal: AbortSignal | undefined,
  buffered: boolean,
): AsyncGenerator<string, AskDone> {
  const started = performance.now();
  const model = sources.length > 0 ? chatModel() : null;
  let fallbackReason: string | undefined;
  if (model) {
    const name = process.env.ENGRAM_CHAT_MODEL ?? "chat";
    const stream = streamModelAnswer(model, buildPrompt(input.query, sources, input.locale), signal);
    let answer = "";
    try {
      for await (const text of stream.deltas) {
        answer += text;
        yield text;
      }
    } catch (error) {
      // Once text went out the answer cannot be swapped; before that (or while the caller still holds
      // it all), the extractive answer stands in.
      if (signal?.aborted) throw error;
      if (answer && !buffered) throw error instanceof ModelTimeoutError ? modelTimeoutApiError(error) : error;
      console.error(`[${ctx.requestId}] ask: chat model failed; answering extractively: ${error instanceof Error ? error.message : String(error)}`);
      // The provider's own error text is the operator's, not every asker's: it goes to the log under
      // the request id, as a 500's details do.
      fallbackReason = modelFallbackReason(error, `request ${ctx.requestId}`);
    }
    if (!fallbackReason) {
      const cited = parseCitations(answer, sources.length);
      return {
        answer,
        model: name,
        tokens: (await stream.tokens()) ?? estimateTokens(answer),
        citations: cited.map((n) => citation(n, sources[n - 1]!)),
        synthesisMs: performance.now() - started,
      };
    }
  }
  const sentences = await extractSentences(input.query, sources, ctx.user.id);
  const pieces = sentences.length === 0 ? [NOTHING_FOUND] : sentences.map((s, i) => `${i ? " " : ""}${s.text} [${s.source + 1}]`);
  for (const piece of pieces) yield piece;
  const answer = pieces.join("");
  const cited = [...new Set(sentences.map((s) => s.source + 1))];
  return {
    answer,
    model: "extractive",
    tokens: estimateTokens(answer),
    citations: cited.map((n) => citation(n, sources[n - 1]!)),
    synthesisMs: performance.now() - started,
    ...(fallbackReason && { fallbackReason }),
  };
}

function citation(index: number, source: RecalledMemory): AskCitation {
  return { index, memory_id: source.id, title: source.title, kind: source.kind };
}

/** The whole answer at once (the JSON form of POST /v1/ask). */
export async function askQuestion(ctx: AuthContext, input: AskInput, signal?: AbortSignal): Promise<AskResult> {
  const started = performance.now();
  const run = await startAsk(ctx, input);
  const writer = run.answer(signal, { buffered: true });
  let step = await writer.next();
  while (!step.done) step = await writer.next();
  const done = step.value;
  return {
    answer: done.answer,
    citations: done.citations,
    sources: run.sources,
    metadata: {
      model: done.model,
      answer_tokens: done.tokens,
      retrieval_latency_ms: round(run.retrievalMs),
      synthesis_latency_ms: round(done.synthesisMs),
      total_latency_ms: round(performance.now() - started),
      ...(done.fallbackReason && { fallback_reason: done.fallbackReason }),
    },
  };
}

export { round as roundMs };
