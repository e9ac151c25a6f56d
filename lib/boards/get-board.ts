import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { SETTLED_SLOTS_SHOWN } from "./decision-gate-fields.ts";
import { OPEN_GATE_STATES } from "./gate-notifications.ts";
import { serializeBoard, serializeGateSlot } from "./serialize-board.ts";

/**
 * GET /v1/hubs/{id}/board (and /boards/{board_id}, whose only board is the hub's own): the hub's
 * board with its cards. These are the open decision gates (at most MAX_OPEN_GATES), newest first,
 * then the SETTLED_SLOTS_SHOWN most recent settled ones.
 */
export async function getBoard(ctx: AuthContext, hubId: string, boardId?: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "memories.read", "read the board");
  if (boardId !== undefined && boardId !== hub.id) throw new ApiError("not_found", "Board not found");
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
