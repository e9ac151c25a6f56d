import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { requestDecisionBodySchema } from "@/lib/boards/decision-gate-fields.ts";
import { requestDecision } from "@/lib/boards/request-decision.ts";

// POST /v1/hubs/{id}/board/decision-gate — an agent asks its person to choose among 2–4 options (a board card and a pending notification)
export const POST = withAuth<{ id: string }>({}, async (ctx, req, { id }) => ok(await requestDecision(ctx, id, await parseJson(req, requestDecisionBodySchema)), 201));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
