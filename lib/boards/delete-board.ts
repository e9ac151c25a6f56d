import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { hubPermissionOrThrow, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { customBoardLockKey } from "./custom-board-fields.ts";
import { assertManagesBoard, findCustomBoardOrThrow } from "./find-custom-board.ts";

/** DELETE /v1/hubs/{id}/boards/{board_id}: a custom board and its card's history. The system board stays. */
export async function deleteBoard(ctx: AuthContext, hubId: string, boardId: string) {
  const membership = await hubPermissionOrThrow(ctx, hubId, "memories.read", "read the board");
  if (boardId === membership.hub.id) throw new ApiError("invalid_request", "The hub's own board cannot be deleted");
  const board = await findCustomBoardOrThrow(ctx, membership.hub.id, boardId);
  assertManagesBoard(ctx, membership, board, "delete this board");
  await ctx.db.$transaction(async (tx) => {
    // As updateBoard: the refresh's lock, then the membership again under its lock, so a member
    // removed or demoted while this request was on its way deletes nothing.
    await lockForTransaction(tx, customBoardLockKey(board.id));
    const locked = await lockMembershipOrThrow(tx, ctx, membership.hub, "memories.read", "read the board");
    assertManagesBoard(ctx, locked, board, "delete this board");
    await tx.customBoard.delete({ where: { id: board.id } });
  });
  return { deleted: true };
}
