import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listQuerySchema } from "@/lib/hubs/hub-fields.ts";
import { listHubMail } from "@/lib/mail/list-hub-mail.ts";

// GET /v1/hubs/{id}/mail — the hub's mail outbox, newest first (paginated; owner or admin)
export const GET = withAuth<{ id: string }>({}, async (ctx, req, { id }) => ok(await listHubMail(ctx, id, parseQuery(req, listQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
