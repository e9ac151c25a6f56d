import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listBoards } from "@/lib/boards/list-boards.ts";

// GET /v1/hubs/{id}/boards — the hub's boards: its system board (custom boards are not built, so POST is a 405)
export const GET = withAuth<{ id: string }>({}, async (ctx, _req, { id }) => ok(await listBoards(ctx, id)));

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");
