import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { getPublicInvite } from "@/lib/invites/get-public-invite.ts";

// GET /v1/invites/{token} — public: what the join page shows; rate-limited per client address
export const GET = withPublic<{ token: string }>({ bucket: "regular" }, async (ctx, _req, { token }) => ok(await getPublicInvite(ctx, token)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
