import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import { hubPermissionOrThrow, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { customBoardLockKey, type UpdateBoardBody } from "./custom-board-fields.ts";
import { assertManagesBoard, findCustomBoardOrThrow } from "./find-custom-board.ts";
import { kickCustomBoard } from "./kick-custom-board.ts";
import { serializeCustomBoard } from "./serialize-custom-board.ts";

/**
 * PATCH /v1/hubs/{id}/boards/{board_id}: title, instruction, or pause/resume. A new instruction
 * empties the card and the board cooks again: the old card answered a different question.
 */
export async function updateBoard(ctx: AuthContext, hubId: string, boardId: string, input: UpdateBoardBody) {
  const membership = await hubPermissionOrThrow(ctx, hubId, "memories.read", "read the board");
  // As DELETE says: the hub's own board (its decision gates) has nothing to change.
  if (boardId === membership.hub.id) throw new ApiError("invalid_request", "The hub's own board cannot be changed");
  const board = await findCustomBoardOrThrow(ctx, membership.hub.id, boardId);
  assertManagesBoard(ctx, membership, board, "change this board");
  const { updated, before } = await ctx.db.$transaction(async (tx) => {
    // The refresh's lock, and the board read again under it: a card written a moment ago counts, and
    // a card being written now sees the new instruction and is dropped.
    await lockForTransaction(tx, customBoardLockKey(board.id));
    // Still the board's creator who may write, or a manager, now: one removed or demoted meanwhile
    // changes nothing (an admin made a contributor may still write, but no longer manages others' boards).
    const locked = await lockMembershipOrThrow(tx, ctx, membership.hub, "memories.write", "change this board");
    const current = await tx.customBoard.findUniqueOrThrow({ where: { id: board.id } });
    assertManagesBoard(ctx, locked, current, "change this board");
    const rewritten = input.instruction !== undefined && input.instruction !== current.instruction;
    // Paused stays paused until resumed; otherwise a board with its card is active, and one without
    // (new, or its instruction just rewritten) cooks until the card is written.
    const requested = input.status ?? (current.status === "paused" ? "paused" : "active");
    const status = requested === "paused" ? "paused" : !rewritten && current.cardPayload ? "active" : "cooking";
    if (rewritten) {
      await tx.customBoardCardVersion.deleteMany({ where: { boardId: board.id } });
      await tx.customBoardFeedback.deleteMany({ where: { boardId: board.id } });
    }
    const next = await tx.customBoard.update({
      where: { id: board.id },
      data: {
        ...(input.title !== undefined && { title: input.title }),
        ...(rewritten && {
          instruction: input.instruction,
          cardPayload: Prisma.DbNull,
          cardCiteMemoryIds: [],
          cardState: null,
          cardResolution: Prisma.DbNull,
          cardDreamRunId: null,
          cardContentUpdatedAt: null,
          cardCreatedAt: null,
          cardAskedAt: null,
        }),
        status,
      },
    });
    return { updated: next, before: current };
  });
  // A board still cooking has its card on the way, unless its question just changed.
  if (updated.status === "cooking" && (updated.instruction !== before.instruction || before.status !== "cooking")) kickCustomBoard(board.id);
  return { board: serializeCustomBoard(updated) };
}
