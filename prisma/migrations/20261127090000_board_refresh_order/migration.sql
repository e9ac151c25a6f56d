-- When the refresh that wrote a custom board's card began asking (lib/boards/refresh-custom-board.ts):
-- two refreshes at once (a dream run on each of two processes, or one racing the board's first
-- answer) write in the order they asked, so a slower, older answer never replaces a newer one.
ALTER TABLE "custom_boards" ADD COLUMN "card_asked_at" TIMESTAMPTZ(3);
