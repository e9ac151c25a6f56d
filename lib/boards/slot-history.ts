import type { AuthContext } from "@/lib/api/context.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { findGateSlot } from "./find-gate-slot.ts";

/**
 * GET /v1/hubs/{id}/board/slots/{slot_key}/history: a card's earlier contents, newest first. A
 * decision gate's question and options never change once asked (answers and reopens change its
 * state, which the slot itself shows), so a gate has no earlier versions.
 */
export async function slotHistory(ctx: AuthContext, hubId: string, slotKey: string): Promise<{ versions: never[] }> {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "memories.read", "read the board");
  await findGateSlot(ctx.db, hub.id, slotKey);
  return { versions: [] };
}
