import { ApiError } from "@/lib/api/errors.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { DecisionGate } from "@/lib/db/generated/client.ts";
import { isUuid } from "@/lib/ids.ts";
import { GATE_SLOT_PREFIX } from "./serialize-board.ts";

/** A slot key as sent: clients encode its colon, and a router may or may not have decoded it already. */
export function decodeSlotKey(slotKey: string): string {
  return slotKey.replace(/%3A/gi, ":");
}

/** The decision gate behind a slot key (`decision:<gate id>`) of one hub's board; anything else is not found. */
export async function findGateSlot(db: DbClient, hubId: string, slotKey: string): Promise<DecisionGate> {
  const key = decodeSlotKey(slotKey);
  const gateId = key.startsWith(GATE_SLOT_PREFIX) ? key.slice(GATE_SLOT_PREFIX.length) : "";
  const gate = isUuid(gateId) ? await db.decisionGate.findFirst({ where: { id: gateId, hubId } }) : null;
  if (!gate) throw new ApiError("not_found", "No such card on this hub's board");
  return gate;
}
