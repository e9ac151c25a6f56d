-- Accurate / inaccurate verdicts on a custom board's card (lib/boards/card-feedback.ts): one per member
-- and card content, keyed by the content's time so a verdict stays with the answer it judged.
CREATE TABLE "custom_board_feedback" (
    "board_id" UUID NOT NULL,
    "content_produced_at" TIMESTAMPTZ(3) NOT NULL,
    "user_id" UUID NOT NULL,
    "verdict" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "custom_board_feedback_pkey" PRIMARY KEY ("board_id", "content_produced_at", "user_id"),
    CONSTRAINT "custom_board_feedback_verdict_check" CHECK ("verdict" IN ('accurate', 'inaccurate')),
    CONSTRAINT "custom_board_feedback_board_id_fkey" FOREIGN KEY ("board_id") REFERENCES "custom_boards"("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "custom_board_feedback_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "custom_board_feedback_user_id_idx" ON "custom_board_feedback"("user_id");
