import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getPersonaRevision } from "@/lib/personas/get-persona-revision.ts";

// GET /v1/personas/{id}/revisions/{version} — one stored version with its content
export const GET = withAuth<{ id: string; version: string }>({ personal: true }, async (ctx, _req, { id, version }) => ok(await getPersonaRevision(ctx, id, version)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
