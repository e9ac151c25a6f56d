-- The sweep of runs waiting for a worker (pendingDreamRuns: every minute in process, daily under Inngest)
-- takes the oldest queued or running runs by created_at, and no index gave them in that order: every
-- sweep read all of them and sorted them, or scanned the table's finished runs too, which only grow.
-- Only waiting runs are in it (at most one per hub), so it stays small.
CREATE INDEX "dream_runs_waiting_created_at_idx" ON "dream_runs"("created_at") WHERE "status" IN ('queued', 'running');
