import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { deletePersona } from "@/lib/personas/delete-persona.ts";

// DELETE /v1/personas/{id} — drop the persona from the list; its file stays (it returns when the file changes)
export const DELETE = withAuth<{ id: string }>({ personal: true }, async (ctx, _req, { id }) => ok(await deletePersona(ctx, id)));

export const { GET, POST, PUT, PATCH, OPTIONS } = methodsNotAllowed("DELETE");
