import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getBoard } from "@/lib/boards/get-board.ts";

// GET /v1/hubs/{id}/boards/{board_id} — one board with its cards (the system board's id is the hub's)
export const GET = withAuth<{ id: string; board_id: string }>({}, async (ctx, _req, { id, board_id }) => ok(await getBoard(ctx, id, board_id)));

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");
