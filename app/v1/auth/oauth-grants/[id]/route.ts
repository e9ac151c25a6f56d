import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { revokeOwnGrant } from "@/lib/oauth/list-grants.ts";

// DELETE /v1/auth/oauth-grants/{id} — disconnect an app: its access and refresh tokens stop working at once
export const DELETE = withAuth<{ id: string }>({ account: true, credentials: true }, async (ctx, _req, { id }) => ok(await revokeOwnGrant(ctx, id)));

export const { GET, POST, PUT, PATCH, OPTIONS } = methodsNotAllowed("DELETE");
