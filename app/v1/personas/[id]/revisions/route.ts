import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listQuerySchema } from "@/lib/hubs/hub-fields.ts";
import { listPersonaRevisions } from "@/lib/personas/list-persona-revisions.ts";

// GET /v1/personas/{id}/revisions — the persona file's stored versions, newest first, without content (paginated)
export const GET = withAuth<{ id: string }>({ personal: true }, async (ctx, req, { id }) => ok(await listPersonaRevisions(ctx, id, parseQuery(req, listQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
