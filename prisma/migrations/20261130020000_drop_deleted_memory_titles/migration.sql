-- What rows written before the delete-time clean-up of titles (lib/memories/drop-memory-copies.ts) still
-- quote of memories hard-deleted since: the same clean-up, once, over the existing rows.

-- The actions naming a memory that no longer exists, with the reason each gives from now on
-- (DELETED_REASON): the one the run wrote quotes both memories' titles.
CREATE TEMPORARY TABLE "titled_gone" ON COMMIT DROP AS
SELECT d."id", d."run_id", d."action_type", d."reason" AS "old_reason",
       CASE d."action_type"
         WHEN 'merge' THEN 'merged as near-duplicates; one of the two memories has since been deleted'
         WHEN 'contradiction' THEN 'two memories disagreed; one of them has since been deleted'
         ELSE 'archived as stale; the memory has since been deleted'
       END AS "new_reason",
       d."source_memory_ids"[1] IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "memories" m WHERE m."id" = d."source_memory_ids"[1]) AS "a_gone",
       d."source_memory_ids"[2] IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "memories" m WHERE m."id" = d."source_memory_ids"[2]) AS "b_gone"
  FROM "dream_actions" d
 WHERE d."action_type" IN ('merge', 'contradiction', 'archive')
   AND EXISTS (SELECT 1 FROM unnest(d."source_memory_ids") AS s("id") WHERE NOT EXISTS (SELECT 1 FROM "memories" m WHERE m."id" = s."id"));

-- A run's report lists its first actions, a line each: "- " then the reason.
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT "run_id", "old_reason", "new_reason" FROM "titled_gone" WHERE "old_reason" <> "new_reason" LOOP
    UPDATE "dream_runs" SET "report" = replace("report", E'\n- ' || r."old_reason", E'\n- ' || r."new_reason")
     WHERE "id" = r."run_id" AND strpos("report", E'\n- ' || r."old_reason") > 0;
  END LOOP;
END $$;

-- A review shows "(deleted)" as the deleted side's title, without its excerpt or the values read from
-- the two texts (in the order the pair was compared, not a/b).
UPDATE "dream_actions" d SET
  "reason" = g."new_reason",
  "details" = CASE WHEN g."action_type" = 'contradiction' THEN
    jsonb_set(jsonb_set(d."details" - 'values'
                          #- CASE WHEN g."a_gone" THEN '{a,excerpt}'::text[] ELSE '{}'::text[] END
                          #- CASE WHEN g."b_gone" THEN '{b,excerpt}'::text[] ELSE '{}'::text[] END,
                        CASE WHEN g."a_gone" THEN '{a,title}'::text[] ELSE '{}'::text[] END, '"(deleted)"'::jsonb, false),
              CASE WHEN g."b_gone" THEN '{b,title}'::text[] ELSE '{}'::text[] END, '"(deleted)"'::jsonb, false)
    ELSE d."details" END
  FROM "titled_gone" g WHERE d."id" = g."id";

-- The review's bell rows (open or decided) name both sides by title and quote the reason.
UPDATE "notifications" n SET "payload" = jsonb_set(jsonb_set(jsonb_set(n."payload",
         CASE WHEN g."a_gone" THEN '{memory_a,title}'::text[] ELSE '{}'::text[] END, '"(deleted)"'::jsonb, false),
         CASE WHEN g."b_gone" THEN '{memory_b,title}'::text[] ELSE '{}'::text[] END, '"(deleted)"'::jsonb, false),
       '{reason}', to_jsonb(g."new_reason"), false)
  FROM "titled_gone" g
 WHERE g."action_type" = 'contradiction' AND n."kind" = 'review_contradiction' AND n."source_id" = g."id"::text;

-- A failed processing's bell row names the memory it failed on.
UPDATE "notifications" n SET "payload" = jsonb_set(n."payload", '{memory,title}', '"(deleted)"'::jsonb, false)
 WHERE n."kind" = 'memory_processing_failed'
   AND NOT EXISTS (SELECT 1 FROM "memories" m WHERE m."id"::text = n."source_id");
