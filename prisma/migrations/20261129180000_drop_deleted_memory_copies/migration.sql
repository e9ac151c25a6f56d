-- What rows written before the delete-time clean-up (lib/memories/drop-memory-copies.ts) and the turn-end
-- one (withoutPassages in lib/chat/run-chat-turn.ts) still keep of memories hard-deleted since: the
-- same clean-up, once, over the existing rows, so a delete that was "not recoverable" is not
-- recoverable from them either.

-- A dream action naming a memory that no longer exists: a merge loses the kept memory's original
-- content, a contradiction review the deleted side's excerpt, and a review still pending closes
-- (resolved, memory_deleted) with its bell rows (expired): neither side can be kept once one is gone.
WITH named AS (
  SELECT d."id", d."state",
         d."source_memory_ids"[1] IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "memories" m WHERE m."id" = d."source_memory_ids"[1]) AS "a_gone",
         d."source_memory_ids"[2] IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "memories" m WHERE m."id" = d."source_memory_ids"[2]) AS "b_gone"
    FROM "dream_actions" d
   WHERE d."action_type" IN ('merge', 'contradiction')
     AND EXISTS (SELECT 1 FROM unnest(d."source_memory_ids") AS s("id") WHERE NOT EXISTS (SELECT 1 FROM "memories" m WHERE m."id" = s."id"))
), changed AS (
  UPDATE "dream_actions" d SET
    "details" = CASE
      WHEN d."action_type" = 'merge' THEN d."details" - 'original_content'
      ELSE (CASE WHEN named."a_gone" THEN d."details" #- '{a,excerpt}' ELSE d."details" END)
           #- CASE WHEN named."b_gone" THEN '{b,excerpt}'::text[] ELSE '{}'::text[] END
    END,
    "state" = CASE WHEN named."state" = 'pending_review' THEN 'resolved' ELSE d."state" END,
    "resolution" = CASE WHEN named."state" = 'pending_review' THEN 'memory_deleted' ELSE d."resolution" END,
    "resolved_at" = CASE WHEN named."state" = 'pending_review' THEN now() ELSE d."resolved_at" END
    FROM named WHERE d."id" = named."id"
  RETURNING d."id", named."state" AS "was"
)
UPDATE "notifications" n SET "status" = 'expired', "resolved_at" = now()
  FROM changed
 WHERE changed."was" = 'pending_review'
   AND n."kind" = 'review_contradiction' AND n."source_id" = changed."id"::text AND n."status" = 'pending';

-- A finished chat turn keeps what its recall found (result.memories), not the passages it read
-- (result.sources, up to 8 × 1,500 characters of memory text). A turn still running keeps them: a
-- worker taking it over answers from the same.
UPDATE "chat_messages" cm
   SET "tool_calls" = (
     SELECT jsonb_agg(CASE WHEN jsonb_typeof(e."call" -> 'result') = 'object' THEN jsonb_set(e."call", '{result}', (e."call" -> 'result') - 'sources') ELSE e."call" END
                      ORDER BY e."i")
       FROM jsonb_array_elements(cm."tool_calls") WITH ORDINALITY AS e("call", "i"))
 WHERE cm."finished_at" IS NOT NULL
   AND jsonb_typeof(cm."tool_calls") = 'array'
   AND jsonb_path_exists(cm."tool_calls", '$[*].result.sources');

-- A custom board's card citing a memory that no longer exists quotes it: the card is emptied (its
-- verdicts with it) and the board cooks again, unless paused; a version of its history citing one
-- goes with its verdicts. The boards left cooking are answered again at the next start-up
-- (kickCookingBoards in lib/boards/kick-custom-board.ts) or the hub's next dream run.
WITH "gone" AS (
  DELETE FROM "custom_board_card_versions" v
   WHERE EXISTS (SELECT 1 FROM unnest(v."cite_memory_ids") AS s("id") WHERE NOT EXISTS (SELECT 1 FROM "memories" m WHERE m."id" = s."id"))
  RETURNING v."board_id", v."content_produced_at"
)
DELETE FROM "custom_board_feedback" f USING "gone"
 WHERE f."board_id" = "gone"."board_id" AND f."content_produced_at" = "gone"."content_produced_at";

WITH "old" AS (
  SELECT b."id", b."card_content_updated_at" FROM "custom_boards" b
   WHERE EXISTS (SELECT 1 FROM unnest(b."card_cite_memory_ids") AS s("id") WHERE NOT EXISTS (SELECT 1 FROM "memories" m WHERE m."id" = s."id"))
), "verdicts" AS (
  DELETE FROM "custom_board_feedback" f USING "old" WHERE f."board_id" = "old"."id" AND f."content_produced_at" = "old"."card_content_updated_at"
)
UPDATE "custom_boards" b SET
  "card_payload" = NULL, "card_cite_memory_ids" = '{}', "card_state" = NULL, "card_resolution" = NULL, "card_dream_run_id" = NULL,
  "card_content_updated_at" = NULL, "card_created_at" = NULL, "card_asked_at" = NULL,
  "status" = CASE WHEN b."status" = 'paused' THEN 'paused' ELSE 'cooking' END, "updated_at" = now()
  FROM "old" WHERE b."id" = "old"."id";
