import { z } from "zod";
import { cursorSchema } from "@/lib/api/pagination.ts";
import { isUuid, normalizeId } from "@/lib/ids.ts";

/** Limits of the chat surface (docs/chat.md). */
export const CHAT_LIMITS = {
  contentChars: 16_000,
  titleChars: 200,
  pinnedMemories: 12,
  scopeHubs: 20,
  /** Rows per session (user and assistant turns together); a longer conversation starts a new session. */
  messagesPerSession: 1_000,
  /** Live (not deleted) sessions per user: archived ones count, deleted ones do not. */
  sessionsPerUser: 1_000,
  idempotencyKeyChars: 128,
  /** How long a mutating tool waits for its owner's decision. */
  approvalMs: 10 * 60_000,
  /** How long a turn's stream can be replayed. */
  replayMs: 24 * 3_600_000,
} as const;

export const CHAT_SCOPE_TYPES = ["user_all_hubs", "single_hub", "hub_subset"] as const;
export type ChatScopeType = (typeof CHAT_SCOPE_TYPES)[number];

/** The one toolset this server offers; a change to the catalog bumps it. */
export const TOOLSET_VERSION = 1;

export interface ChatToolDescriptor {
  name: string;
  description: string;
  default_in_chat: boolean;
  approval_required: boolean;
  available: boolean;
  notes?: string;
}

export const CHAT_TOOLS: readonly ChatToolDescriptor[] = [
  {
    name: "recall",
    description: "Search the session's hubs for the memories that answer the message",
    default_in_chat: true,
    approval_required: false,
    available: true,
  },
  {
    name: "push_memory",
    description: "Save what you ask it to remember (\"remember that …\") as a new memory in the session's write hub",
    default_in_chat: true,
    approval_required: true,
    available: true,
    notes: "Runs only after you approve it; a read-only key cannot approve it",
  },
  {
    name: "web_search",
    description: "Search the web",
    default_in_chat: false,
    approval_required: false,
    available: false,
    notes: "Not offered: Engram answers from your memories and runs without outside network access",
  },
];

export const DEFAULT_CHAT_TOOLS = CHAT_TOOLS.filter((t) => t.default_in_chat).map((t) => t.name);

/** The models a session may name: the local extractive writer always, the configured chat model when there is one. */
export function chatModelNames(): string[] {
  const configured = process.env.ENGRAM_CHAT_MODEL && process.env.OPENAI_API_KEY ? [process.env.ENGRAM_CHAT_MODEL] : [];
  return [...configured, "local"];
}

// Lowercased, as the database names them: scope, write hub and pins are compared with its ids.
const uuid = (what: string) => z.string().refine(isUuid, `${what} must be a UUID`).toLowerCase();

const toolsSchema = z
  .array(z.string())
  .max(CHAT_TOOLS.length)
  .superRefine((tools, ctx) => {
    for (const [i, name] of tools.entries()) {
      const tool = CHAT_TOOLS.find((t) => t.name === name);
      if (!tool) ctx.addIssue({ code: "custom", path: [i], message: `unknown tool "${name}"; GET /v1/chat/tools lists them` });
      else if (!tool.available) ctx.addIssue({ code: "custom", path: [i], message: `tool "${name}" is not available here` });
    }
  });

// "" inherits the account's default persona, "none" turns personas off, otherwise a persona id.
// "" (the account default), "none", or a persona id, lowered as every id is where it enters: kept as
// sent, an upper-case id was stored and answered unlike the persona's own (and the settings' default),
// and a client comparing them found no match.
const personaSchema = z.string().max(100).overwrite(normalizeId).meta({ keepEmpty: true });

export const createChatSessionBodySchema = z.object({
  title: z.string().trim().max(CHAT_LIMITS.titleChars).optional(),
  scope_type: z.enum(CHAT_SCOPE_TYPES),
  scope_hub_ids: z.array(uuid("scope_hub_ids item")).max(CHAT_LIMITS.scopeHubs).optional(),
  write_hub_id: uuid("write_hub_id").optional(),
  tools: toolsSchema.optional(),
  model: z.string().max(100).optional(),
  persona_id: personaSchema.optional(),
  pinned_memory_ids: z.array(uuid("pinned_memory_ids item")).max(CHAT_LIMITS.pinnedMemories).optional(),
});
export type CreateChatSessionBody = z.output<typeof createChatSessionBodySchema>;

export const updateChatSessionBodySchema = z.object({
  title: z.string().trim().max(CHAT_LIMITS.titleChars).meta({ keepEmpty: true }).optional(),
  pinned: z.boolean().optional(),
  archived: z.boolean().optional(),
  tools: toolsSchema.optional(),
  // "" clears it (mutating tools then pick the personal hub, or the one writable hub in scope).
  write_hub_id: z.union([uuid("write_hub_id"), z.literal("")]).meta({ keepEmpty: true }).optional(),
  persona_id: personaSchema.optional(),
  // A session's reach is fixed when it starts: these are refused, not ignored.
  scope_type: z.never({ error: "a session's scope cannot change; start a new session" }).optional(),
  scope_hub_ids: z.never({ error: "a session's scope cannot change; start a new session" }).optional(),
});
export type UpdateChatSessionBody = z.output<typeof updateChatSessionBodySchema>;

export const listChatSessionsQuerySchema = z.object({
  // false (the default) lists live sessions, true only archived ones.
  archived: z.enum(["true", "false"]).optional(),
  // true lists only pinned sessions.
  pinned: z.enum(["true", "false"]).optional(),
  limit: z.string().optional(),
  cursor: cursorSchema.optional(),
});
export type ListChatSessionsQuery = z.output<typeof listChatSessionsQuerySchema>;

export const listChatMessagesQuerySchema = z.object({ limit: z.string().optional(), cursor: cursorSchema.optional() });
export type ListChatMessagesQuery = z.output<typeof listChatMessagesQuerySchema>;

export const sendChatMessageBodySchema = z.object({
  content: z.string().trim().min(1, "content must not be empty").max(CHAT_LIMITS.contentChars),
  // A client-made id: a retry with the same key returns the first send's turn instead of a second one.
  idempotency_key: z.string().trim().max(CHAT_LIMITS.idempotencyKeyChars).optional(),
});
export type SendChatMessageBody = z.output<typeof sendChatMessageBodySchema>;

export const decideChatApprovalBodySchema = z.object({ decision: z.enum(["approve", "deny"]) });

/** The advisory lock that orders a session's turns, cancels, decisions and terminal writes. */
export const chatSessionLockKey = (sessionId: string) => `chat-session:${sessionId}`;

export const TERMINAL_STATUSES = ["completed", "partial_failed", "failed", "canceled"] as const;
export const TERMINAL_EVENTS = ["message.completed", "message.partial_failed", "message.failed", "message.canceled"] as const;
export const isTerminal = (status: string) => (TERMINAL_STATUSES as readonly string[]).includes(status);
