import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createInvite } from "@/lib/invites/create-invite.ts";
import { createInviteBodySchema } from "@/lib/invites/invite-fields.ts";
import { listInvites } from "@/lib/invites/list-invites.ts";

type Params = { id: string };

// GET /v1/hubs/{id}/invites — usable invites, without tokens, one array (≤ 20 per hub; owner or admin)
export const GET = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await listInvites(ctx, id)));

// POST /v1/hubs/{id}/invites — create a join link; the token is shown in this response only
export const POST = withAuth<Params>({}, async (ctx, req, { id }) =>
  ok(await createInvite(ctx, id, await parseJson(req, createInviteBodySchema, { optional: true })), 201),
);

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");
