import type { AuthContext } from "@/lib/api/context.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { serializeBoard } from "./serialize-board.ts";

/** GET /v1/hubs/{id}/boards: the hub's boards. Engram builds only the system board (its decision gates), so there is one. */
export async function listBoards(ctx: AuthContext, hubId: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "memories.read", "read the board");
  return { boards: [serializeBoard(hub)] };
}
