import type { AgentSession } from "@/lib/db/generated/client.ts";

export function serializeAgentSession(row: AgentSession, content?: string) {
  return {
    id: row.id,
    owner_id: row.ownerId,
    agent: row.agent,
    session_id: row.sessionId,
    title: row.title,
    project_path: row.projectPath,
    device_id: row.deviceId,
    content_type: row.contentType,
    content_hash: row.contentHash,
    size_bytes: row.sizeBytes,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    ...(content !== undefined && { content }),
  };
}
