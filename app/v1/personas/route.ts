import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listPersonas, listPersonasQuerySchema } from "@/lib/personas/list-personas.ts";

// GET /v1/personas — personas read from the caller's synced identity files (SOUL.md, IDENTITY.md, PERSONA.md, personas/*.md); a page holds at most 8 MiB of content
export const GET = withAuth({ personal: true }, async (ctx, req) => ok(await listPersonas(ctx, parseQuery(req, listPersonasQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
