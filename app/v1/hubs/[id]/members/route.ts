import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { addMember } from "@/lib/hubs/add-member.ts";
import { addMemberBodySchema, listQuerySchema } from "@/lib/hubs/hub-fields.ts";
import { listMembers } from "@/lib/hubs/list-members.ts";

type Params = { id: string };

// GET /v1/hubs/{id}/members — all members, paginated (hub detail embeds only the first 100)
export const GET = withAuth<Params>({}, async (ctx, req, { id }) => ok(await listMembers(ctx, id, parseQuery(req, listQuerySchema))));

// POST /v1/hubs/{id}/members — add an existing user directly with a role
export const POST = withAuth<Params>({}, async (ctx, req, { id }) => ok(await addMember(ctx, id, await parseJson(req, addMemberBodySchema)), 201));

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");
