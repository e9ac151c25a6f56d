import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { assertManagesBoard, findCustomBoardOrThrow } from "./find-custom-board.ts";

/** DELETE /v1/hubs/{id}/boards/{board_id}: a custom board and its card's history. The system board stays. */
export async function deleteBoard(ctx: AuthContext, hubId: string, boardId: string) {
  const membership = await hubPermissionOrThrow(ctx, hubId, "memories.read", "read the board");
  if (boardId === membership.hub.id) throw new ApiError("invalid_request", "The hub's own board cannot be deleted");
  const board = await findCustomBoardOrThrow(ctx, membership.hub.id, boardId);
  assertManagesBoard(ctx, membership, board, "delete this board");
  await ctx.db.customBoard.delete({ where: { id: board.id } });
  return { deleted: true };
}
