-- Decision gates: an agent's question to its person, shown on the hub's board (lib/boards).
CREATE TABLE "decision_gates" (
    "id" UUID NOT NULL,
    "hub_id" UUID NOT NULL,
    "requested_by" UUID NOT NULL,
    "source_agent" TEXT,
    "question" TEXT NOT NULL,
    "options" TEXT[],
    "context" TEXT,
    "state" TEXT NOT NULL DEFAULT 'fresh',
    "choice" INTEGER,
    "resolution" TEXT,
    "resolved_by" UUID,
    "resolved_at" TIMESTAMPTZ(3),
    "memory_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "decision_gates_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "decision_gates_hub_id_created_at_idx" ON "decision_gates"("hub_id", "created_at" DESC);
CREATE INDEX "decision_gates_requested_by_idx" ON "decision_gates"("requested_by");
ALTER TABLE "decision_gates" ADD CONSTRAINT "decision_gates_hub_id_fkey" FOREIGN KEY ("hub_id") REFERENCES "hubs"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "decision_gates" ADD CONSTRAINT "decision_gates_requested_by_fkey" FOREIGN KEY ("requested_by") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;
