import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { restorePersonaRevision } from "@/lib/personas/restore-persona-revision.ts";

// POST /v1/personas/{id}/revisions/{version}/restore — write that version back into the file as a new version
export const POST = withAuth<{ id: string; version: string }>({ personal: true }, async (ctx, _req, { id, version }) => ok(await restorePersonaRevision(ctx, id, version)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
