import { z } from "zod";

/** Custom boards a hub holds; one more is `409 board_limit`. */
export const MAX_CUSTOM_BOARDS = 10;
export const MAX_BOARD_TITLE_CHARS = 100;
export const MAX_INSTRUCTION_CHARS = 2000;
/** Earlier contents of a card that its history keeps. */
export const CARD_VERSIONS_KEPT = 20;
/** A custom board's one card (`board:<board id>`): the instruction's answer. */
export const CUSTOM_SLOT_PREFIX = "board:";
/** Orders a board's card writes against changes to its instruction. */
export const customBoardLockKey = (boardId: string) => `custom-board:${boardId}`;

const title = z.string().trim().min(1, "title must not be empty").max(MAX_BOARD_TITLE_CHARS, `title is at most ${MAX_BOARD_TITLE_CHARS} characters`);
const instruction = z
  .string()
  .trim()
  .min(1, "instruction must not be empty")
  .max(MAX_INSTRUCTION_CHARS, `instruction is at most ${MAX_INSTRUCTION_CHARS} characters`);

export const createBoardBodySchema = z.object({ title, instruction });
export type CreateBoardBody = z.output<typeof createBoardBodySchema>;

export const updateBoardBodySchema = z.object({
  title: title.optional(),
  instruction: instruction.optional(),
  // `cooking` is the server's to set (a new or rewritten instruction waits for its first card).
  status: z.enum(["active", "paused"]).optional(),
});
export type UpdateBoardBody = z.output<typeof updateBoardBodySchema>;
