import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { visitHub } from "@/lib/hubs/visit-hub.ts";

// POST /v1/hubs/{id}/visit — record that the caller looked at the hub (a read receipt: read-only keys may send it)
export const POST = withAuth<{ id: string }>({ reads: true }, async (ctx, _req, { id }) => ok(await visitHub(ctx, id)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
