-- Agent configs synced across devices, and agent session files (issue 15).
CREATE TABLE "agent_configs" (
    "id" UUID NOT NULL,
    "owner_id" UUID NOT NULL,
    "agent" TEXT NOT NULL,
    "file_path" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "content" TEXT NOT NULL,
    "content_hash" TEXT NOT NULL,
    "size_bytes" INTEGER NOT NULL,
    "version" INTEGER NOT NULL DEFAULT 1,
    "deleted_at" TIMESTAMPTZ(3),
    "content_expires_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_configs_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "agent_configs_owner_id_fkey" FOREIGN KEY ("owner_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "agent_configs_owner_id_agent_file_path_scope_key" ON "agent_configs"("owner_id", "agent", "file_path", "scope");
CREATE INDEX "agent_configs_owner_id_updated_at_id_idx" ON "agent_configs"("owner_id", "updated_at" DESC, "id" DESC);

CREATE TABLE "agent_config_versions" (
    "id" UUID NOT NULL,
    "config_id" UUID NOT NULL,
    "version" INTEGER NOT NULL,
    "content" TEXT NOT NULL,
    "content_hash" TEXT NOT NULL,
    "device_id" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_config_versions_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "agent_config_versions_config_id_fkey" FOREIGN KEY ("config_id") REFERENCES "agent_configs"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "agent_config_versions_config_id_version_key" ON "agent_config_versions"("config_id", "version");

CREATE TABLE "agent_config_devices" (
    "config_id" UUID NOT NULL,
    "device_id" TEXT NOT NULL,
    "synced_version" INTEGER NOT NULL,
    "synced_hash" TEXT,
    "deleted" BOOLEAN NOT NULL DEFAULT false,
    "removed" BOOLEAN NOT NULL DEFAULT false,
    "local_path" TEXT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_config_devices_pkey" PRIMARY KEY ("config_id", "device_id"),
    CONSTRAINT "agent_config_devices_config_id_fkey" FOREIGN KEY ("config_id") REFERENCES "agent_configs"("id") ON DELETE CASCADE ON UPDATE CASCADE
);

CREATE TABLE "agent_sessions" (
    "id" UUID NOT NULL,
    "owner_id" UUID NOT NULL,
    "agent" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "title" TEXT NOT NULL DEFAULT '',
    "project_path" TEXT,
    "device_id" TEXT,
    "content_type" TEXT NOT NULL,
    "content_hash" TEXT NOT NULL,
    "size_bytes" INTEGER NOT NULL,
    "store_key" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_sessions_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "agent_sessions_owner_id_fkey" FOREIGN KEY ("owner_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "agent_sessions_owner_id_agent_session_id_key" ON "agent_sessions"("owner_id", "agent", "session_id");
CREATE INDEX "agent_sessions_owner_id_updated_at_id_idx" ON "agent_sessions"("owner_id", "updated_at" DESC, "id" DESC);

CREATE TABLE "agent_session_blobs" (
    "key" TEXT NOT NULL,
    "content" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "agent_session_blobs_pkey" PRIMARY KEY ("key")
);
