-- Dreams: background consolidation runs and their undoable actions (issue 15).
ALTER TABLE "memories" ADD COLUMN "superseded_by" UUID;

CREATE TABLE "dream_runs" (
    "id" UUID NOT NULL,
    "hub_id" UUID NOT NULL,
    "triggered_by" UUID,
    "mode" TEXT NOT NULL DEFAULT 'maintenance',
    "status" TEXT NOT NULL,
    "phase" TEXT NOT NULL DEFAULT 'similar',
    "progress" JSONB NOT NULL DEFAULT '{}',
    "memories_scanned" INTEGER NOT NULL DEFAULT 0,
    "phase_metrics" JSONB NOT NULL DEFAULT '{}',
    "report" TEXT NOT NULL DEFAULT '',
    "error" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "lease_owner" TEXT,
    "heartbeat_at" TIMESTAMPTZ(3),
    "started_at" TIMESTAMPTZ(3),
    "finished_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "dream_runs_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "dream_runs_hub_id_fkey" FOREIGN KEY ("hub_id") REFERENCES "hubs"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "dream_runs_hub_id_created_at_id_idx" ON "dream_runs"("hub_id", "created_at" DESC, "id" DESC);
CREATE INDEX "dream_runs_status_heartbeat_at_idx" ON "dream_runs"("status", "heartbeat_at");
-- One run at a time per hub: a second trigger finds the first instead of starting another.
CREATE UNIQUE INDEX "dream_runs_one_active" ON "dream_runs"("hub_id") WHERE "status" IN ('queued', 'running');

CREATE TABLE "dream_actions" (
    "id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "hub_id" UUID NOT NULL,
    "action_type" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "source_memory_ids" UUID[],
    "result_memory_id" UUID,
    "from_topic_id" UUID,
    "to_topic_id" UUID,
    "created_topic" BOOLEAN NOT NULL DEFAULT false,
    "reason" TEXT NOT NULL,
    "similarity" DOUBLE PRECISION NOT NULL DEFAULT 0,
    "details" JSONB NOT NULL DEFAULT '{}',
    "resolution" TEXT,
    "resolved_by" UUID,
    "resolved_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "dream_actions_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "dream_actions_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "dream_runs"("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "dream_actions_hub_id_fkey" FOREIGN KEY ("hub_id") REFERENCES "hubs"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "dream_actions_run_id_created_at_id_idx" ON "dream_actions"("run_id", "created_at", "id");
CREATE INDEX "dream_actions_hub_id_action_type_state_idx" ON "dream_actions"("hub_id", "action_type", "state");
