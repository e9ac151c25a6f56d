import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listGrants } from "@/lib/oauth/list-grants.ts";

// GET /v1/auth/oauth-grants — apps connected through OAuth (MCP clients): hubs, access, last use
export const GET = withAuth({}, async (ctx) => ok({ grants: await listGrants(ctx) }));

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");
