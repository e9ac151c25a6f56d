import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { slotHistory } from "@/lib/boards/slot-history.ts";

// GET /v1/hubs/{id}/board/slots/{slot_key}/history — a card's earlier contents (a decision gate has none)
export const GET = withAuth<{ id: string; slot_key: string }>({}, async (ctx, _req, { id, slot_key }) => ok(await slotHistory(ctx, id, slot_key)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
