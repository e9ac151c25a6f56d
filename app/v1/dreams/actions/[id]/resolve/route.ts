import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { resolveDreamAction, resolveDreamActionBodySchema } from "@/lib/dreams/undo-dream-action.ts";

// POST /v1/dreams/actions/:id/resolve — settle a contradiction: keep_a, keep_b or keep_both
export const POST = withAuth<{ id: string }>({}, async (ctx, req, params) => {
  const body = await parseJson(req, resolveDreamActionBodySchema);
  return ok(await resolveDreamAction(ctx, params.id, body.resolution, body.version));
});

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
