import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { resendInvite } from "@/lib/invites/resend-invite.ts";

// POST /v1/hubs/{id}/invites/{invite_id}/resend — e-mail the same link again through the mail outbox
export const POST = withAuth<{ id: string; invite_id: string }>({}, async (ctx, _req, { id, invite_id }) =>
  ok(await resendInvite(ctx, id, invite_id)),
);

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
