import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { leaveHub } from "@/lib/hubs/leave-hub.ts";

// POST /v1/hubs/{id}/leave — end the caller's own membership (owners transfer or delete instead)
export const POST = withAuth<{ id: string }>({}, async (ctx, _req, { id }) => ok(await leaveHub(ctx, id)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
