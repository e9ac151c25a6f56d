import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { addWarning } from "@/lib/api/warnings.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createMemory } from "@/lib/memories/create-memory.ts";
import { listMemories } from "@/lib/memories/list-memories.ts";
import { createMemoryBodySchema, listMemoriesQuerySchema, MAX_MEMORY_BODY_BYTES } from "@/lib/memories/memory-fields.ts";
import { countUsage } from "@/lib/usage/count-usage.ts";

// POST /v1/memories — push a memory into X-Hub-ID's hub, or the caller's personal hub
export const POST = withAuth({ permission: "memories.write" }, async (ctx, req) => {
  const result = await createMemory(ctx, await parseJson(req, createMemoryBodySchema, { maxBytes: MAX_MEMORY_BODY_BYTES }));
  for (const warning of result.warnings) addWarning(req, warning);
  await countUsage(ctx, "pushes");
  return ok(result.memory, result.created ? 201 : 200);
});

// GET /v1/memories — memories of every readable hub (or hub_id), newest or most used first
export const GET = withAuth({}, async (ctx, req) => ok(await listMemories(ctx, parseQuery(req, listMemoriesQuerySchema))));

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");
