import { ApiError } from "@/lib/api/errors.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { CustomBoard } from "@/lib/db/generated/client.ts";
import { isUuid } from "@/lib/ids.ts";
import { CUSTOM_SLOT_PREFIX } from "./custom-board-fields.ts";
import { decodeSlotKey } from "./find-gate-slot.ts";

/** Whether a slot key names a custom board's card (`board:<board id>`) rather than a decision gate. */
export function isCustomSlotKey(slotKey: string): boolean {
  return decodeSlotKey(slotKey).startsWith(CUSTOM_SLOT_PREFIX);
}

/** The custom board whose card the key names, in this hub, once it has a card; anything else is not found. */
export async function findCustomSlot(db: DbClient, hubId: string, slotKey: string): Promise<CustomBoard> {
  const boardId = decodeSlotKey(slotKey).slice(CUSTOM_SLOT_PREFIX.length);
  const board = isUuid(boardId) ? await db.customBoard.findFirst({ where: { id: boardId, hubId } }) : null;
  if (!board?.cardPayload) throw new ApiError("not_found", "No such card on this hub's boards");
  return board;
}
