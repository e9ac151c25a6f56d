import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { acceptInvite } from "@/lib/invites/accept-invite.ts";

// POST /v1/invites/{token}/accept — join the invite's hub with its role (single use)
export const POST = withAuth<{ token: string }>({}, async (ctx, _req, { token }) => ok(await acceptInvite(ctx, token)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
