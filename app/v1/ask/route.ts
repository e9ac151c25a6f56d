import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { wantsEventStream } from "@/lib/api/sse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { askBodySchema } from "@/lib/ask/ask-fields.ts";
import { askQuestion } from "@/lib/ask/ask-question.ts";
import { streamAsk } from "@/lib/ask/stream-ask.ts";
import { countUsage } from "@/lib/usage/count-usage.ts";

// POST /v1/ask — an answer from recall's sources with citations; SSE with Accept: text/event-stream
// Reads only (an answer from recall), so a read-only key may ask.
export const POST = withAuth({ bucket: "heavy", reads: true }, async (ctx, req) => {
  const body = await parseJson(req, askBodySchema);
  const input = { ...body, preferred_hub_id: ctx.hubHeader };
  if (wantsEventStream(req)) return streamAsk(ctx, input, req.signal, () => countUsage(ctx, "asks"));
  const result = await askQuestion(ctx, input, req.signal);
  await countUsage(ctx, "asks");
  return ok(result);
});

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
