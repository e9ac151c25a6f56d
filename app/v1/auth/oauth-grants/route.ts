import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listQuerySchema } from "@/lib/hubs/hub-fields.ts";
import { listGrants } from "@/lib/oauth/list-grants.ts";

// GET /v1/auth/oauth-grants — apps connected through OAuth (MCP clients): hubs, access, last use (paginated); not for their tokens
export const GET = withAuth({ credentials: true }, async (ctx, req) => ok(await listGrants(ctx, parseQuery(req, listQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
