import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { deleteMemory } from "@/lib/memories/delete-memory.ts";
import { getMemory } from "@/lib/memories/get-memory.ts";
import { MAX_MEMORY_BODY_BYTES, updateMemoryBodySchema } from "@/lib/memories/memory-fields.ts";
import { updateMemory } from "@/lib/memories/update-memory.ts";

type Params = { id: string };

// GET /v1/memories/{id} — one memory with content and attachments (Next runs this for HEAD too, which is no access)
export const GET = withAuth<Params>({}, async (ctx, req, { id }) => ok(await getMemory(ctx, id, { countAccess: req.method !== "HEAD" })));

// PATCH /v1/memories/{id} — change title, tags, content, classification or archive state; answers the full memory
export const PATCH = withAuth<Params>({}, async (ctx, req, { id }) =>
  ok(await updateMemory(ctx, id, await parseJson(req, updateMemoryBodySchema, { maxBytes: MAX_MEMORY_BODY_BYTES }))),
);

// DELETE /v1/memories/{id} — hard delete with chunks and attachments
export const DELETE = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await deleteMemory(ctx, id)));

export const { POST, PUT, OPTIONS } = methodsNotAllowed("GET", "PATCH", "DELETE");
