import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { addWarning } from "@/lib/api/warnings.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createMemory } from "@/lib/memories/create-memory.ts";
import { listMemories } from "@/lib/memories/list-memories.ts";
import { createMemoryBodySchema, listMemoriesQuerySchema } from "@/lib/memories/memory-fields.ts";
import { countUsage } from "@/lib/usage/count-usage.ts";

// POST /v1/memories — push a memory into X-Hub-ID's hub, or the caller's personal hub
export const POST = withAuth({ permission: "memories.write" }, async (ctx, req) => {
  let body = await parseJson(req, createMemoryBodySchema);
  // Memax's CLI labels any one-line push that starts with http(s):// a link, notes after the URL included;
  // a link is one URL, so such a push keeps its text as a note instead of being refused.
  if (body.content_type === "link" && !body.file_ref && /^https?:\/\/\S+\s/i.test(body.content.trim())) {
    addWarning(req, 'content_type "link" ignored: the content is a URL with more text after it, so it is kept as text');
    body = { ...body, content_type: undefined };
  }
  const agent = ctx.credential.agentName;
  if (agent && body.source_agent && body.source_agent !== agent) addWarning(req, `source_agent ignored: this API key pushes as "${agent}"`);
  const result = await createMemory(ctx, body);
  await countUsage(ctx, "pushes");
  return ok(result.memory, result.created ? 201 : 200);
});

// GET /v1/memories — memories of every readable hub (or hub_id), newest or most used first
export const GET = withAuth({}, async (ctx, req) => ok(await listMemories(ctx, parseQuery(req, listMemoriesQuerySchema))));

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");
