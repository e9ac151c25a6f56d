import type { AuthContext } from "@/lib/api/context.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { SETTLED_SLOTS_SHOWN } from "./decision-gate-fields.ts";
import { OPEN_GATE_STATES } from "./gate-notifications.ts";
import { liveCardFeedback } from "./card-feedback.ts";
import { findCustomBoardOrThrow } from "./find-custom-board.ts";
import { serializeBoard, serializeGateSlot } from "./serialize-board.ts";
import { serializeCustomBoard, serializeCustomSlot } from "./serialize-custom-board.ts";

/**
 * GET /v1/hubs/{id}/board (and /boards/{board_id}): the hub's own board with its cards, the open
 * decision gates (at most MAX_OPEN_GATES), newest first, then the SETTLED_SLOTS_SHOWN most recent
 * settled ones; or a custom board with its one card (none while it cooks).
 */
export async function getBoard(ctx: AuthContext, hubId: string, boardId?: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "memories.read", "read the board");
  if (boardId !== undefined && boardId !== hub.id) {
    const board = await findCustomBoardOrThrow(ctx, hub.id, boardId);
    const slot = serializeCustomSlot(board, await liveCardFeedback(ctx.db, board, ctx.user.id));
    return { board: serializeCustomBoard(board), slots: slot ? [slot] : [] };
  }
  const [open, settled] = await Promise.all([
    ctx.db.decisionGate.findMany({ where: { hubId: hub.id, state: { in: [...OPEN_GATE_STATES] } }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] }),
    ctx.db.decisionGate.findMany({
      where: { hubId: hub.id, state: { notIn: [...OPEN_GATE_STATES] } },
      orderBy: [{ resolvedAt: "desc" }, { id: "desc" }],
      take: SETTLED_SLOTS_SHOWN,
    }),
  ]);
  return { board: serializeBoard(hub), slots: [...open, ...settled].map(serializeGateSlot) };
}
