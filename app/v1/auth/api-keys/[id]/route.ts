import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { revokeApiKey } from "@/lib/auth/revoke-api-key.ts";

// DELETE /v1/auth/api-keys/{id} — revoke one of the caller's keys ({ revoked: false } when unknown or already revoked)
export const DELETE = withAuth<{ id: string }>({ account: true }, async (ctx, _req, { id }) => ok(await revokeApiKey(ctx, id)));

export const { GET, POST, PUT, PATCH } = methodsNotAllowed("DELETE");
