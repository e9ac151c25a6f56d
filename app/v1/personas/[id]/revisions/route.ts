import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listPersonaRevisions } from "@/lib/personas/list-persona-revisions.ts";

// GET /v1/personas/{id}/revisions — the persona file's stored versions, newest first, without content
export const GET = withAuth<{ id: string }>({ personal: true }, async (ctx, _req, { id }) => ok(await listPersonaRevisions(ctx, id)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
