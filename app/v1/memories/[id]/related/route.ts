import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { relatedMemories } from "@/lib/recall/related-memories.ts";

type Params = { id: string };

// GET /v1/memories/{id}/related — up to five similar memories from the caller's hubs, as [{ memory, similarity }]
export const GET = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await relatedMemories(ctx, id)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
