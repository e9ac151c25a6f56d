import type { AgentConfig } from "@/lib/db/generated/client.ts";

/** The SDK's AgentConfig shape. */
export function serializeConfig(config: AgentConfig) {
  return {
    id: config.id,
    owner_id: config.ownerId,
    agent: config.agent,
    file_path: config.filePath,
    scope: config.scope,
    content: config.content,
    content_hash: config.contentHash,
    size_bytes: config.sizeBytes,
    version: config.version,
    created_at: config.createdAt.toISOString(),
    updated_at: config.updatedAt.toISOString(),
  };
}

/** The SDK's DeletedAgentConfig shape. */
export function serializeDeletedConfig(config: Pick<AgentConfig, "agent" | "filePath" | "scope" | "version" | "deletedAt" | "contentHash" | "contentExpiresAt">) {
  return {
    agent: config.agent,
    file_path: config.filePath,
    scope: config.scope,
    version: config.version,
    deleted_at: config.deletedAt!.toISOString(),
    deleted_content_hash: config.contentHash,
    content_expires_at: config.contentExpiresAt?.toISOString(),
  };
}
