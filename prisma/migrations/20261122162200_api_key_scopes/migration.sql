-- API keys with real scopes: read/write, a hub allowlist, agent attribution.
ALTER TABLE "api_keys" ADD COLUMN     "scopes" TEXT[] DEFAULT ARRAY['read', 'write']::TEXT[],
ADD COLUMN     "hub_scope_mode" TEXT NOT NULL DEFAULT 'all_accessible',
ADD COLUMN     "hub_ids" UUID[] DEFAULT ARRAY[]::UUID[],
ADD COLUMN     "agent_name" TEXT,
ADD COLUMN     "standalone" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "permissions" TEXT[] DEFAULT ARRAY[]::TEXT[],
ADD COLUMN     "trust_level" TEXT;
