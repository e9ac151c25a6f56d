import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getBoard } from "@/lib/boards/get-board.ts";

// GET /v1/hubs/{id}/board — the hub's board: open decision gates first, then recently settled ones
export const GET = withAuth<{ id: string }>({}, async (ctx, _req, { id }) => ok(await getBoard(ctx, id)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
