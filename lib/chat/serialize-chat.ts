import type { ChatMessage, ChatSession } from "@/lib/db/generated/client.ts";

const iso = (date: Date | null) => (date ? date.toISOString() : undefined);

/** A session as Memax's SDK reads it (ChatSession); optional fields are left out when unset. */
export function serializeChatSession(session: ChatSession) {
  return {
    id: session.id,
    owner_id: session.ownerId,
    scope_type: session.scopeType,
    scope_hub_ids: session.scopeHubIds,
    write_hub_id: session.writeHubId ?? "",
    title: session.title,
    model: session.model,
    tools: session.tools,
    toolset_version: session.toolsetVersion,
    status: session.status,
    active_message_id: session.activeMessageId ?? undefined,
    persona_id: session.personaId,
    pinned_memory_ids: session.pinnedMemoryIds,
    locked_at: iso(session.lockedAt),
    message_count: session.messageCount,
    pinned_at: iso(session.pinnedAt),
    archived_at: iso(session.archivedAt),
    last_message_at: iso(session.lastMessageAt),
    created_at: session.createdAt.toISOString(),
    updated_at: session.updatedAt.toISOString(),
    deleted_at: iso(session.deletedAt),
  };
}

/**
 * A message's tool calls as clients see them. A recall's result names the memories it found; the
 * passages it read (kept while the turn runs, so a resumed turn answers from the same; dropped when it
 * ends) stay on the server: they are those memories' text at the time, which must not outlive a memory
 * deleted or a hub left since.
 */
function publicToolCalls(calls: unknown): unknown {
  if (!Array.isArray(calls)) return calls ?? undefined;
  return calls.map((call: { result?: unknown }) => {
    if (!call?.result || typeof call.result !== "object" || !("sources" in call.result)) return call;
    const { sources: _kept, ...result } = call.result as Record<string, unknown>;
    return { ...call, result };
  });
}

/** A message as the SDK reads it (ChatMessage). The worker's lease and credential stay inside. */
export function serializeChatMessage(message: ChatMessage) {
  return {
    id: message.id,
    session_id: message.sessionId,
    sequence: message.sequence,
    role: message.role,
    author_user_id: message.authorUserId,
    status: message.status,
    scope_hub_ids_used: message.scopeHubIdsUsed,
    content: message.content,
    tool_calls: publicToolCalls(message.toolCalls),
    citations: message.citations ?? undefined,
    usage: message.usage ?? undefined,
    error: message.error ?? undefined,
    idempotency_key: message.idempotencyKey ?? undefined,
    parent_message_id: message.parentMessageId ?? undefined,
    toolset_version_used: message.toolsetVersionUsed,
    started_at: iso(message.startedAt),
    finished_at: iso(message.finishedAt),
    created_at: message.createdAt.toISOString(),
  };
}
