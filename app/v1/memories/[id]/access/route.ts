import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { trackMemoryAccess } from "@/lib/memories/track-memory-access.ts";

type Params = { id: string };

// POST /v1/memories/{id}/access — a deliberate view: one access, unless the same open was just counted
export const POST = withAuth<Params>({ reads: true }, async (ctx, _req, { id }) => ok(await trackMemoryAccess(ctx, id)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
