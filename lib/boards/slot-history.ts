import type { AuthContext } from "@/lib/api/context.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { cardFeedback } from "./card-feedback.ts";
import { findCustomSlot, isCustomSlotKey } from "./find-custom-slot.ts";
import { findGateSlot } from "./find-gate-slot.ts";
import { serializeCardVersion } from "./serialize-custom-board.ts";

/**
 * GET /v1/hubs/{id}/board/slots/{slot_key}/history: a card's earlier contents, newest first. A
 * custom board's card keeps its last CARD_VERSIONS_KEPT answers. A decision gate's question and
 * options never change once asked (answers and reopens are its state), so a gate has none.
 */
export async function slotHistory(ctx: AuthContext, hubId: string, slotKey: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "memories.read", "read the board");
  if (isCustomSlotKey(slotKey)) {
    const board = await findCustomSlot(ctx.db, hub.id, slotKey);
    const versions = await ctx.db.customBoardCardVersion.findMany({ where: { boardId: board.id }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] });
    const feedback = await cardFeedback(ctx.db, board.id, ctx.user.id, versions.map((v) => v.contentProducedAt));
    return { versions: versions.map((v) => serializeCardVersion(board, v, feedback.get(v.contentProducedAt.getTime()))) };
  }
  await findGateSlot(ctx.db, hub.id, slotKey);
  return { versions: [] };
}
