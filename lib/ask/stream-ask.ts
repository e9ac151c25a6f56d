import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { sseResponse } from "@/lib/api/sse.ts";
import { roundMs, startAsk, type AskInput } from "./ask-question.ts";

/**
 * SSE form of ask: `sources` (the recalled array), `delta {text}`…, then `done {tokens, model}` or
 * `error {message}`. `onAnswered` runs once the answer is whole: an ask is counted when it succeeds,
 * as the JSON form is, not when its stream opens.
 */
export function streamAsk(ctx: AuthContext, input: AskInput, requestSignal?: AbortSignal, onAnswered?: () => Promise<void>): Response {
  return sseResponse(async (sse) => {
    const started = performance.now();
    const signal = requestSignal ? AbortSignal.any([requestSignal, sse.signal]) : sse.signal;
    try {
      const run = await startAsk(ctx, input);
      if (!sse.send("sources", run.sources)) return;
      const writer = run.answer(signal);
      let step = await writer.next();
      while (!step.done) {
        if (!sse.send("delta", { text: step.value })) {
          await writer.return(undefined as never).catch(() => undefined);
          return;
        }
        step = await writer.next();
      }
      const done = step.value;
      // Counted before done goes out, so a client reading its usage after done finds this ask in it.
      await onAnswered?.();
      sse.send("done", {
        tokens: done.tokens,
        model: done.model,
        citations: done.citations,
        metadata: {
          model: done.model,
          answer_tokens: done.tokens,
          retrieval_latency_ms: roundMs(run.retrievalMs),
          synthesis_latency_ms: roundMs(done.synthesisMs),
          total_latency_ms: roundMs(performance.now() - started),
          ...(done.fallbackReason && { fallback_reason: done.fallbackReason }),
        },
      });
    } catch (error) {
      if (sse.closed) return;
      const known = error instanceof ApiError;
      if (!known) console.error(`[${ctx.requestId}] ask stream failed`, error);
      sse.send("error", {
        code: known ? error.code : "internal",
        message: known ? error.message : `The answer could not be written (request ${ctx.requestId})`,
      });
    } finally {
      sse.close();
    }
  });
}
