-- Connected agents (lib/agents): the owner's display name and icon for an agent of theirs.
CREATE TABLE "connected_agents" (
    "id" UUID NOT NULL,
    "owner_id" UUID NOT NULL,
    "agent_name" TEXT NOT NULL,
    "display_name" TEXT NOT NULL DEFAULT '',
    "icon" TEXT NOT NULL DEFAULT '',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "connected_agents_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "connected_agents_owner_id_agent_name_key" ON "connected_agents"("owner_id", "agent_name");
ALTER TABLE "connected_agents" ADD CONSTRAINT "connected_agents_owner_id_fkey" FOREIGN KEY ("owner_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;
-- Agents are named on keys and configs, and counted over memories by source_agent.
CREATE INDEX "api_keys_user_id_agent_name_idx" ON "api_keys"("user_id", "agent_name");
CREATE INDEX "memories_owner_id_source_agent_idx" ON "memories"("owner_id", "source_agent");
