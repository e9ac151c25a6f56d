import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { visitHub } from "@/lib/hubs/visit-hub.ts";

// POST /v1/hubs/{id}/visit — record that the caller looked at the hub (read receipt for notifications)
export const POST = withAuth<{ id: string }>({}, async (ctx, _req, { id }) => ok(await visitHub(ctx, id)));

export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");
