import type { AuthContext } from "@/lib/api/context.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { serializeBoard } from "./serialize-board.ts";
import { serializeCustomBoard } from "./serialize-custom-board.ts";

/** GET /v1/hubs/{id}/boards: the hub's system board (its decision gates), then its custom boards, oldest first. */
export async function listBoards(ctx: AuthContext, hubId: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "memories.read", "read the board");
  // Bounded by MAX_CUSTOM_BOARDS.
  const custom = await ctx.db.customBoard.findMany({ where: { hubId: hub.id }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  return { boards: [serializeBoard(hub), ...custom.map(serializeCustomBoard)] };
}
