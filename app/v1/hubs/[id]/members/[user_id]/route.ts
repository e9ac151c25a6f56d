import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { updateMemberBodySchema } from "@/lib/hubs/hub-fields.ts";
import { removeMember } from "@/lib/hubs/remove-member.ts";
import { updateMember } from "@/lib/hubs/update-member.ts";

type Params = { id: string; user_id: string };

// PATCH /v1/hubs/{id}/members/{user_id} — change a member's role (admin, contributor, viewer)
export const PATCH = withAuth<Params>({}, async (ctx, req, { id, user_id }) =>
  ok(await updateMember(ctx, id, user_id, await parseJson(req, updateMemberBodySchema))),
);

// DELETE /v1/hubs/{id}/members/{user_id} — remove a member from the hub
export const DELETE = withAuth<Params>({}, async (ctx, _req, { id, user_id }) => ok(await removeMember(ctx, id, user_id)));

export const { GET, POST, PUT, OPTIONS } = methodsNotAllowed("PATCH", "DELETE");
