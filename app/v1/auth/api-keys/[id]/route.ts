import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { revokeApiKey } from "@/lib/auth/revoke-api-key.ts";
import { updateApiKey, updateApiKeyBodySchema } from "@/lib/auth/update-api-key.ts";

type Params = { id: string };

// PATCH /v1/auth/api-keys/{id} — set the key's agent (`agent_name`, "" clears it) or its standalone flag
export const PATCH = withAuth<Params>({ account: true, credentials: true }, async (ctx, req, { id }) =>
  ok(await updateApiKey(ctx, id, await parseJson(req, updateApiKeyBodySchema))),
);

// DELETE /v1/auth/api-keys/{id} — revoke one of the caller's keys ({ revoked: false } when unknown or already revoked)
export const DELETE = withAuth<Params>({ account: true, credentials: true }, async (ctx, _req, { id }) => ok(await revokeApiKey(ctx, id)));

export const { GET, POST, PUT, OPTIONS } = methodsNotAllowed("PATCH", "DELETE");
