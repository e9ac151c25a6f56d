-- Agent chat (lib/chat): sessions, their messages, each turn's stream events and tool approvals.
ALTER TABLE "user_settings" ADD COLUMN "chat_default_persona_id" TEXT NOT NULL DEFAULT '';

CREATE TABLE "chat_sessions" (
    "id" UUID NOT NULL,
    "owner_id" UUID NOT NULL,
    "scope_type" TEXT NOT NULL,
    "scope_hub_ids" UUID[] DEFAULT ARRAY[]::UUID[],
    "write_hub_id" UUID,
    "title" TEXT NOT NULL DEFAULT '',
    "model" TEXT NOT NULL,
    "tools" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "toolset_version" INTEGER NOT NULL DEFAULT 1,
    "status" TEXT NOT NULL DEFAULT 'idle',
    "active_message_id" UUID,
    "persona_id" TEXT NOT NULL DEFAULT '',
    "pinned_memory_ids" UUID[] DEFAULT ARRAY[]::UUID[],
    "locked_at" TIMESTAMPTZ(3),
    "message_count" INTEGER NOT NULL DEFAULT 0,
    "pinned_at" TIMESTAMPTZ(3),
    "archived_at" TIMESTAMPTZ(3),
    "last_message_at" TIMESTAMPTZ(3),
    "activity_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,
    "deleted_at" TIMESTAMPTZ(3),

    CONSTRAINT "chat_sessions_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "chat_sessions_owner_id_fkey" FOREIGN KEY ("owner_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "chat_sessions_owner_id_activity_at_id_idx" ON "chat_sessions"("owner_id", "activity_at" DESC, "id" DESC);

CREATE TABLE "chat_messages" (
    "id" UUID NOT NULL,
    "session_id" UUID NOT NULL,
    "sequence" INTEGER NOT NULL,
    "role" TEXT NOT NULL,
    "author_user_id" UUID NOT NULL,
    "status" TEXT NOT NULL,
    "scope_hub_ids_used" UUID[] DEFAULT ARRAY[]::UUID[],
    "content" TEXT NOT NULL DEFAULT '',
    "tool_calls" JSONB,
    "citations" JSONB,
    "usage" JSONB,
    "error" JSONB,
    "idempotency_key" TEXT,
    "parent_message_id" UUID,
    "toolset_version_used" INTEGER NOT NULL DEFAULT 1,
    "credential" JSONB,
    "event_seq" INTEGER NOT NULL DEFAULT 0,
    "lease_owner" TEXT,
    "heartbeat_at" TIMESTAMPTZ(3),
    "started_at" TIMESTAMPTZ(3),
    "finished_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "chat_messages_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "chat_messages_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "chat_sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "chat_messages_session_id_sequence_key" ON "chat_messages"("session_id", "sequence");
CREATE UNIQUE INDEX "chat_messages_session_id_idempotency_key_key" ON "chat_messages"("session_id", "idempotency_key");
CREATE INDEX "chat_messages_status_updated_at_idx" ON "chat_messages"("status", "updated_at");

CREATE TABLE "chat_events" (
    "message_id" UUID NOT NULL,
    "seq" INTEGER NOT NULL,
    "type" TEXT NOT NULL,
    "data" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "chat_events_pkey" PRIMARY KEY ("message_id", "seq"),
    CONSTRAINT "chat_events_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "chat_messages"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "chat_events_created_at_idx" ON "chat_events"("created_at");

CREATE TABLE "chat_approvals" (
    "id" UUID NOT NULL,
    "session_id" UUID NOT NULL,
    "message_id" UUID NOT NULL,
    "tool_call_id" TEXT NOT NULL,
    "tool_name" TEXT NOT NULL,
    "arguments" JSONB NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "credential" JSONB,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "decided_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "chat_approvals_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "chat_approvals_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "chat_messages"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "chat_approvals_message_id_tool_call_id_key" ON "chat_approvals"("message_id", "tool_call_id");
CREATE INDEX "chat_approvals_status_expires_at_idx" ON "chat_approvals"("status", "expires_at");
