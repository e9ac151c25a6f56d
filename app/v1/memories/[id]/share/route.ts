import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { shareMemory, shareMemoryBodySchema } from "@/lib/memories/share-memory.ts";
import { countUsage } from "@/lib/usage/count-usage.ts";

// POST /v1/memories/{id}/share — copy a readable memory into another hub the caller can write to (201, or 200 when that hub already has it)
export const POST = withAuth<{ id: string }>({}, async (ctx, req, { id }) => {
  const result = await shareMemory(ctx, id, await parseJson(req, shareMemoryBodySchema));
  await countUsage(ctx, "pushes");
  return ok(result.memory, result.created ? 201 : 200);
});

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
