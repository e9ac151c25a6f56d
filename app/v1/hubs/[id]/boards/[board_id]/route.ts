import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { updateBoardBodySchema } from "@/lib/boards/custom-board-fields.ts";
import { deleteBoard } from "@/lib/boards/delete-board.ts";
import { getBoard } from "@/lib/boards/get-board.ts";
import { updateBoard } from "@/lib/boards/update-board.ts";

type Params = { id: string; board_id: string };

// GET /v1/hubs/{id}/boards/{board_id} — one board with its cards (the hub's own board has the hub's id)
export const GET = withAuth<Params>({}, async (ctx, _req, { id, board_id }) => ok(await getBoard(ctx, id, board_id)));

// PATCH /v1/hubs/{id}/boards/{board_id} — a custom board's title, instruction, or pause/resume
export const PATCH = withAuth<Params>({}, async (ctx, req, { id, board_id }) => ok(await updateBoard(ctx, id, board_id, await parseJson(req, updateBoardBodySchema))));

// DELETE /v1/hubs/{id}/boards/{board_id} — delete a custom board
export const DELETE = withAuth<Params>({}, async (ctx, _req, { id, board_id }) => ok(await deleteBoard(ctx, id, board_id)));

export const { POST, PUT, OPTIONS } = methodsNotAllowed("GET", "PATCH", "DELETE");
