import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { hubPermissionOrThrow, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { newId } from "@/lib/ids.ts";
import { MAX_CUSTOM_BOARDS, type CreateBoardBody } from "./custom-board-fields.ts";
import { kickCustomBoard } from "./kick-custom-board.ts";
import { serializeCustomBoard } from "./serialize-custom-board.ts";

/**
 * POST /v1/hubs/{id}/boards: a custom board from a standing instruction. It starts `cooking`; its
 * first card is written in the background right away (and refreshed by every dream run after).
 */
export async function createBoard(ctx: AuthContext, hubId: string, input: CreateBoardBody) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "memories.write", "add boards");
  const board = await ctx.db.$transaction(async (tx) => {
    // The count under a per-hub lock: simultaneous creates cannot pass the limit.
    await lockForTransaction(tx, `custom-boards:${hub.id}`);
    // Still a member who may write, now: a board of someone removed meanwhile would never be refreshed.
    await lockMembershipOrThrow(tx, ctx, hub, "memories.write", "add boards");
    const count = await tx.customBoard.count({ where: { hubId: hub.id } });
    if (count >= MAX_CUSTOM_BOARDS) {
      throw new ApiError("board_limit", `A hub holds at most ${MAX_CUSTOM_BOARDS} custom boards; delete one first`, { limit: MAX_CUSTOM_BOARDS });
    }
    const now = ctx.now();
    return tx.customBoard.create({
      data: { id: newId(now.getTime()), hubId: hub.id, createdBy: ctx.user.id, title: input.title, instruction: input.instruction, createdAt: now, updatedAt: now },
    });
  });
  kickCustomBoard(board.id);
  return { board: serializeCustomBoard(board) };
}
