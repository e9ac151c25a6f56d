import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { regenerateInvite } from "@/lib/invites/regenerate-invite.ts";

// POST /v1/hubs/{id}/invites/{invite_id}/regenerate — new token and expiry; the old link dies
export const POST = withAuth<{ id: string; invite_id: string }>({}, async (ctx, _req, { id, invite_id }) =>
  ok(await regenerateInvite(ctx, id, invite_id)),
);

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
