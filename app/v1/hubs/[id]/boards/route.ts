import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createBoard } from "@/lib/boards/create-board.ts";
import { createBoardBodySchema } from "@/lib/boards/custom-board-fields.ts";
import { listBoards } from "@/lib/boards/list-boards.ts";

type Params = { id: string };

// GET /v1/hubs/{id}/boards — the hub's boards: its own (decision gates), then its custom boards
export const GET = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await listBoards(ctx, id)));

// POST /v1/hubs/{id}/boards — a custom board answering a standing instruction from the hub's memories
export const POST = withAuth<Params>({}, async (ctx, req, { id }) => ok(await createBoard(ctx, id, await parseJson(req, createBoardBodySchema)), 201));

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");
