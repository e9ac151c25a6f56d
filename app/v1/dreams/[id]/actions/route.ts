import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listDreamActionsQuerySchema } from "@/lib/dreams/dream-fields.ts";
import { listDreamActions } from "@/lib/dreams/dream-queries.ts";

// GET /v1/dreams/:id/actions — everything the run did, in order
export const GET = withAuth<{ id: string }>({}, async (ctx, req, params) => ok(await listDreamActions(ctx, params.id, parseQuery(req, listDreamActionsQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
