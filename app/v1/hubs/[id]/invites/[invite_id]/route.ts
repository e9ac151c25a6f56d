import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { revokeInvite } from "@/lib/invites/revoke-invite.ts";

// DELETE /v1/hubs/{id}/invites/{invite_id} — revoke an invite; its link stops working at once
export const DELETE = withAuth<{ id: string; invite_id: string }>({}, async (ctx, _req, { id, invite_id }) =>
  ok(await revokeInvite(ctx, id, invite_id)),
);

export const { GET, POST, PUT, PATCH, OPTIONS } = methodsNotAllowed("DELETE");
