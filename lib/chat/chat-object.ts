import { z } from "zod";
import { CHAT_SCOPE_TYPES } from "./chat-fields.ts";

/** The response shapes of the chat routes (OpenAPI document and its response check). */
export const chatSessionObjectSchema = z
  .object({
    id: z.string(),
    owner_id: z.string(),
    scope_type: z.enum(CHAT_SCOPE_TYPES),
    scope_hub_ids: z.array(z.string()),
    write_hub_id: z.string().meta({ description: "\"\" when unset" }),
    title: z.string(),
    model: z.string(),
    tools: z.array(z.string()),
    toolset_version: z.int(),
    status: z.enum(["idle", "running", "awaiting_approval", "canceling"]),
    active_message_id: z.string().optional(),
    persona_id: z.string().meta({ description: "\"\" inherits the account default, \"none\" turns personas off" }),
    pinned_memory_ids: z.array(z.string()),
    locked_at: z.string().optional(),
    message_count: z.int(),
    pinned_at: z.string().optional(),
    archived_at: z.string().optional(),
    last_message_at: z.string().optional(),
    created_at: z.string(),
    updated_at: z.string(),
    deleted_at: z.string().optional(),
  })
  .meta({ id: "ChatSession" });

export const chatMessageObjectSchema = z
  .object({
    id: z.string(),
    session_id: z.string(),
    sequence: z.int(),
    role: z.enum(["user", "assistant", "system"]),
    author_user_id: z.string(),
    status: z.enum(["queued", "running", "completed", "partial_failed", "failed", "canceled", "canceling"]),
    scope_hub_ids_used: z.array(z.string()),
    content: z.string(),
    tool_calls: z.unknown().optional(),
    citations: z.unknown().optional(),
    usage: z.unknown().optional(),
    error: z.unknown().optional(),
    idempotency_key: z.string().optional(),
    parent_message_id: z.string().optional(),
    toolset_version_used: z.int(),
    started_at: z.string().optional(),
    finished_at: z.string().optional(),
    created_at: z.string(),
  })
  .meta({ id: "ChatMessage" });

const turnFields = {
  outcome: z.enum(["fresh", "replay", "in_flight"]),
  assistant_message: chatMessageObjectSchema,
  active_message_id: z.string(),
  resume_url: z.string(),
};

export const sendChatMessageResultSchema = z.object({ ...turnFields, user_message_id: z.string() });
export const regenerateChatMessageResultSchema = z.object({ ...turnFields, prior_assistant_id: z.string(), prior_assistant_status: chatMessageObjectSchema.shape.status });
export const cancelChatMessageResultSchema = z.object({
  assistant_message_id: z.string(),
  session_id: z.string(),
  status: chatMessageObjectSchema.shape.status,
  cancel_registered: z.boolean(),
});
export const decideChatApprovalResultSchema = z.object({ approval_id: z.string(), status: z.enum(["approved", "denied", "timed_out"]) });
export const chatToolObjectSchema = z.object({
  name: z.string(),
  description: z.string(),
  default_in_chat: z.boolean(),
  approval_required: z.boolean(),
  available: z.boolean(),
  notes: z.string().optional(),
});
