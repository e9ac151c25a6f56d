import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { recallBodySchema } from "@/lib/recall/recall-fields.ts";
import type { RecallResponse } from "@/lib/recall/recall-object.ts";
import { recallMemories } from "@/lib/recall/recall-memories.ts";
import { countUsage } from "@/lib/usage/count-usage.ts";

// POST /v1/recall — hybrid search over every hub the caller can read (X-Hub-ID ranks that hub first)
export const POST = withAuth({ bucket: "heavy", reads: true }, async (ctx, req) => {
  const body = await parseJson(req, recallBodySchema);
  const result: RecallResponse = await recallMemories(ctx, { ...body, preferred_hub_id: ctx.hubHeader });
  await countUsage(ctx, "recalls");
  return ok(result);
});

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
