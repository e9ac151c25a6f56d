import { z } from "zod";
import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listDreamActions } from "@/lib/dreams/dream-queries.ts";

const listActionsQuerySchema = z.object({
  limit: z.string().optional(),
  cursor: z.string().optional(),
  type: z.enum(["merge", "contradiction", "archive", "organize"]).optional(),
  state: z.enum(["applied", "undone", "pending_review", "resolved"]).optional(),
});

// GET /v1/dreams/:id/actions — everything the run did, in order
export const GET = withAuth<{ id: string }>({}, async (ctx, req, params) => ok(await listDreamActions(ctx, params.id, parseQuery(req, listActionsQuerySchema))));

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");
