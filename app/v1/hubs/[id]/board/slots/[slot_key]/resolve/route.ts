import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { resolveSlotBodySchema } from "@/lib/boards/decision-gate-fields.ts";
import { resolveBoardSlot } from "@/lib/boards/resolve-board-slot.ts";

// POST /v1/hubs/{id}/board/slots/{slot_key}/resolve — answer a decision gate (choose), dismiss it, or reopen it
export const POST = withAuth<{ id: string; slot_key: string }>({}, async (ctx, req, { id, slot_key }) =>
  ok(await resolveBoardSlot(ctx, id, slot_key, await parseJson(req, resolveSlotBodySchema))),
);

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
