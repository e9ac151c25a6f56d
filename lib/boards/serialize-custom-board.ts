import type { CustomBoard, CustomBoardCardVersion } from "@/lib/db/generated/client.ts";
import type { CardFeedback } from "./card-feedback.ts";
import { CUSTOM_SLOT_PREFIX } from "./custom-board-fields.ts";

export const customSlotKey = (boardId: string) => `${CUSTOM_SLOT_PREFIX}${boardId}`;

/** Memax's Board for a custom board. */
export function serializeCustomBoard(board: CustomBoard) {
  return {
    id: board.id,
    hub_id: board.hubId,
    created_by: board.createdBy,
    kind: "custom" as const,
    title: board.title,
    instruction: board.instruction,
    status: board.status,
    created_at: board.createdAt.toISOString(),
    updated_at: board.updatedAt.toISOString(),
  };
}

const NO_FEEDBACK: CardFeedback = { accurate: 0, inaccurate: 0 };

/**
 * The board's card once a dream run (or its creation) wrote one; none while cooking. `feedback` is
 * the members' verdicts on this content (lib/boards/card-feedback.ts).
 */
export function serializeCustomSlot(board: CustomBoard, feedback: CardFeedback | undefined) {
  if (!board.cardPayload || !board.cardState || !board.cardCreatedAt || !board.cardContentUpdatedAt) return undefined;
  const resolution = board.cardResolution as { action: string; verdict?: string; resolved_by: string; resolved_at: string } | null;
  return {
    id: board.id,
    board_id: board.id,
    slot_key: customSlotKey(board.id),
    kind: "instruction_answer",
    title: board.title,
    payload: board.cardPayload as Record<string, unknown>,
    cite_memory_ids: board.cardCiteMemoryIds,
    state: board.cardState,
    ...(resolution && { resolution }),
    feedback: feedback ?? NO_FEEDBACK,
    ...(board.cardDreamRunId && { dream_run_id: board.cardDreamRunId }),
    created_at: board.cardCreatedAt.toISOString(),
    updated_at: board.updatedAt.toISOString(),
    content_updated_at: board.cardContentUpdatedAt.toISOString(),
  };
}

/** Memax's BoardSlotVersion: one earlier content of the card, and when a newer one replaced it. */
export function serializeCardVersion(board: CustomBoard, version: CustomBoardCardVersion, feedback: CardFeedback | undefined) {
  return {
    id: version.id,
    board_id: board.id,
    slot_key: customSlotKey(board.id),
    kind: "instruction_answer",
    title: board.title,
    payload: version.payload as Record<string, unknown>,
    cite_memory_ids: version.citeMemoryIds,
    feedback: feedback ?? NO_FEEDBACK,
    ...(version.dreamRunId && { dream_run_id: version.dreamRunId }),
    content_produced_at: version.contentProducedAt.toISOString(),
    archived_at: version.createdAt.toISOString(),
  };
}
