-- A hard delete of a memory drops what other rows copied of it (a merge's original content, a
-- review's excerpt, a board card citing it) in one statement each: these find those rows by the
-- memory's id, wherever the memory was named, without scanning every action and card.
CREATE INDEX "dream_actions_source_memory_ids_idx" ON "dream_actions" USING GIN ("source_memory_ids");
CREATE INDEX "custom_boards_card_cite_memory_ids_idx" ON "custom_boards" USING GIN ("card_cite_memory_ids");
CREATE INDEX "custom_board_card_versions_cite_memory_ids_idx" ON "custom_board_card_versions" USING GIN ("cite_memory_ids");
