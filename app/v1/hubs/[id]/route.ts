import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { deleteHub } from "@/lib/hubs/delete-hub.ts";
import { getHub } from "@/lib/hubs/get-hub.ts";
import { updateHubBodySchema } from "@/lib/hubs/hub-fields.ts";
import { updateHub } from "@/lib/hubs/update-hub.ts";

type Params = { id: string };

// GET /v1/hubs/{id} — settings, members, caller's role, counts and any pending ownership transfer
export const GET = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await getHub(ctx, id)));

// PATCH /v1/hubs/{id} — rename, change the slug or contributor permissions (owner or admin)
export const PATCH = withAuth<Params>({}, async (ctx, req, { id }) => ok(await updateHub(ctx, id, await parseJson(req, updateHubBodySchema))));

// DELETE /v1/hubs/{id} — delete a team hub and everything in it (owner only)
export const DELETE = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await deleteHub(ctx, id)));

export const { POST, PUT, OPTIONS } = methodsNotAllowed("GET", "PATCH", "DELETE");
