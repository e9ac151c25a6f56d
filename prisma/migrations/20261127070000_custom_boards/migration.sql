-- Custom boards (lib/boards): a standing instruction answered from the hub's memories on one card.
CREATE TABLE "custom_boards" (
    "id" UUID NOT NULL,
    "hub_id" UUID NOT NULL,
    "created_by" UUID NOT NULL,
    "title" TEXT NOT NULL,
    "instruction" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'cooking',
    "card_payload" JSONB,
    "card_cite_memory_ids" UUID[] DEFAULT ARRAY[]::UUID[],
    "card_state" TEXT,
    "card_resolution" JSONB,
    "card_dream_run_id" UUID,
    "card_content_updated_at" TIMESTAMPTZ(3),
    "card_created_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "custom_boards_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "custom_boards_hub_id_fkey" FOREIGN KEY ("hub_id") REFERENCES "hubs"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "custom_boards_hub_id_created_at_idx" ON "custom_boards"("hub_id", "created_at");

CREATE TABLE "custom_board_card_versions" (
    "id" UUID NOT NULL,
    "board_id" UUID NOT NULL,
    "payload" JSONB NOT NULL,
    "cite_memory_ids" UUID[] DEFAULT ARRAY[]::UUID[],
    "dream_run_id" UUID,
    "content_produced_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "custom_board_card_versions_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "custom_board_card_versions_board_id_fkey" FOREIGN KEY ("board_id") REFERENCES "custom_boards"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "custom_board_card_versions_board_id_created_at_idx" ON "custom_board_card_versions"("board_id", "created_at" DESC);
