import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listPersonas } from "@/lib/personas/list-personas.ts";

// GET /v1/personas — personas read from the caller's synced identity files (SOUL.md, IDENTITY.md, PERSONA.md, personas/*.md)
export const GET = withAuth({ personal: true }, async (ctx) => ok(await listPersonas(ctx)));

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");
