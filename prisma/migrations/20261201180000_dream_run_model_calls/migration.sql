-- The chat model calls a dream run has made (merge rewrites), counted before each group is asked. Its
-- bound (ENGRAM_DREAM_MAX_MODEL_CALLS) was counted from the run's saved merge actions, but the similar
-- step asks for every merge before its first batch saves any: a crash, a stop or a step's retry in
-- between lost those calls uncounted, and each attempt asked up to the whole bound again.
ALTER TABLE "dream_runs" ADD COLUMN "model_calls" INTEGER NOT NULL DEFAULT 0;
-- Runs still to finish start from what their saved actions show they asked.
UPDATE "dream_runs" r SET "model_calls" = (
  SELECT count(*) FROM "dream_actions" a WHERE a."run_id" = r."id" AND a."action_type" = 'merge' AND a."details" ? 'model'
) WHERE r."status" IN ('queued', 'running');
