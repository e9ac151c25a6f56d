import type { AskCitation } from "@/lib/ask/ask-question.ts";
import type { RecalledMemory } from "@/lib/recall/load-recalled.ts";

/** Shapes of the /v1 payloads the dashboard reads (decisions.md). */
export type Role = "owner" | "admin" | "contributor" | "viewer";

export interface Hub {
  id: string;
  name: string;
  slug: string;
  hub_type: "personal" | "team";
  owner_id: string;
  allow_contributor_topics: boolean;
  allow_contributor_dreams: boolean;
  contributor_delete_policy: "none" | "own" | "any";
  icon?: string;
  accent?: string;
  header_aurora_mode?: string;
  settings: Record<string, boolean>;
  created_at: string;
  updated_at: string;
}

export interface Page {
  next_cursor: string;
  has_more: boolean;
}

export interface HubListEntry {
  hub: Hub;
  role: Role;
  memory_count: number;
  member_count: number;
}

export interface Member {
  user_id: string;
  role: Role;
  name: string;
  /** Masked ("a•••@example.com") unless the viewer is an owner or admin, or it is their own row. */
  email: string;
  user_name: string;
  user_email: string;
  joined_at: string;
}

export interface Transfer {
  id: string;
  hub_id: string;
  from_user_id: string;
  initiated_by: string;
  target_user_id: string;
  state: string;
  created_at: string;
  expires_at: string;
  resolved_at: string | null;
  accepted_at: string | null;
  cancelled_at: string | null;
}

export interface HubDetail {
  hub: Hub;
  role: Role;
  members: Member[];
  counts: { memories: number; members: number; topics: number; invites: number };
  pending_transfer: Transfer | null;
}

/** GET /v1/hubs/:id/mail: one message of the hub's outbox (links redacted). */
export interface OutboxMail {
  id: string;
  kind: string;
  to: string;
  subject: string;
  body: string;
  status: "sent" | "failed" | "logged";
  error: string | null;
  created_at: string;
  sent_at: string | null;
}

export interface Invite {
  id: string;
  hub_id: string;
  role: Role;
  email?: string | null;
  invite_url: string;
  token?: string;
  created_by: string;
  created_at: string;
  expires_at: string;
  state: string;
}

export interface PublicInvite {
  /** `state` other than active: the link no longer admits anyone (the join page says why). */
  invite: { id: string; hub_id: string; role: Role; created_at: string; expires_at: string; state: "active" | "revoked" | "expired" | "accepted" };
  hub: { id: string; name: string; slug: string; hub_type: "personal" | "team" };
  member_count: number;
  /** The inviter's name. */
  invited_by: string;
}

export interface Memory {
  id: string;
  hub_id: string;
  owner_id: string;
  title: string;
  content_type: string;
  summary: string;
  tags: string[];
  kind: string;
  stability: string;
  state: string;
  source: string;
  source_agent: string | null;
  topic_id: string | null;
  version: number;
  access_count: number;
  processing_status: string;
  processing_error: string | null;
  processed_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface MemoryWithContent extends Memory {
  content: string;
  attachments: {
    id: string;
    filename: string;
    content_type: string;
    size_bytes: number;
    width?: number | null;
    height?: number | null;
    inline_eligible?: boolean;
    created_at: string;
  }[];
}

// Wire shapes shared with the server code (type-only imports: nothing server-side reaches the browser bundle).
export type { RecalledMemory } from "@/lib/recall/load-recalled.ts";
export type { ApiKeyObject as ApiKey } from "@/lib/auth/serialize-api-key.ts";
export type { AskCitation } from "@/lib/ask/ask-question.ts";

export interface RecallResult {
  memories: RecalledMemory[];
  query_metadata: { intent: string; kinds_searched: string[]; total_candidates: number; reranked: boolean; latency_ms: number };
}

export interface Topic {
  id: string;
  name: string;
}

/** A node of GET /v1/topics (the whole tree of one hub). */
export interface TopicNode extends Topic {
  parent_id: string | null;
  memory_count: number;
  total_memory_count: number;
  children: TopicNode[];
}

export interface TopicTree {
  topics: TopicNode[];
  unassigned_count: number;
}


export interface Me {
  id: string;
  email: string;
  name: string;
  personal_hub_id: string | null;
}

/** What the dashboard offers a role; the API enforces the same table. */
export function roleCan(role: Role | undefined, action: "write" | "manage" | "own"): boolean {
  if (!role) return false;
  if (action === "own") return role === "owner";
  if (action === "manage") return role === "owner" || role === "admin";
  return role !== "viewer";
}

/** Memories per page of a hub's list (the server prefetches the first page with the same size). */
export const HUB_PAGE_SIZE = 20;

/** A chat session (GET /v1/chat/sessions/{id}); the fields the dashboard reads. */
export interface ChatSession {
  id: string;
  scope_type: "user_all_hubs" | "single_hub" | "hub_subset";
  title: string;
  status: "idle" | "running" | "awaiting_approval" | "canceling";
  active_message_id?: string;
  message_count: number;
  last_message_at?: string;
  created_at: string;
}

export interface ChatSessionPage extends Page {
  sessions: ChatSession[];
}

export interface ChatCitation {
  index: number;
  memory_id: string;
  title: string;
  hub_id?: string;
}

export type ChatMessageStatus = "queued" | "running" | "canceling" | "completed" | "partial_failed" | "failed" | "canceled";

export interface ChatMessage {
  id: string;
  session_id: string;
  sequence: number;
  role: "user" | "assistant";
  status: ChatMessageStatus;
  content: string;
  citations?: ChatCitation[];
  error?: { code: string; message: string };
  created_at: string;
}

/** 202 of a send or a regenerate: the answer being written and where its stream is. */
export interface ChatTurn {
  assistant_message: ChatMessage;
  active_message_id: string;
  resume_url: string;
  user_message_id?: string;
  prior_assistant_id?: string;
}

/** A turn in one of these states is over (lib/chat/chat-fields.ts, kept out of the browser bundle with its zod schemas). */
export const CHAT_FINISHED: readonly ChatMessageStatus[] = ["completed", "partial_failed", "failed", "canceled"];

/** GET /v1/hubs/{id}/boards: the system board (its id is the hub's, it holds the decision gates) or a custom board. */
export interface Board {
  id: string;
  hub_id: string;
  created_by: string;
  kind: "system" | "custom";
  title: string;
  instruction?: string;
  /** `cooking` until a new or rewritten instruction has its first answer. */
  status: "active" | "cooking" | "paused";
  created_at: string;
  updated_at: string;
}

export type SlotState = "fresh" | "seen" | "resolved" | "dismissed";

interface SlotBase {
  id: string;
  board_id: string;
  slot_key: string;
  title: string;
  cite_memory_ids: string[];
  state: SlotState;
  /** Present while the card is settled; `verdict` when it was settled by feedback. */
  resolution?: { action: string; verdict?: Verdict; resolved_by: string; resolved_at: string };
  created_at: string;
  updated_at: string;
}

export interface GateOption {
  id: string;
  label: string;
}

/** A decision gate on the system board (`decision:<id>`). */
export interface GateSlot extends SlotBase {
  kind: "decision_gate";
  payload: { question: string; options: GateOption[]; context?: string; source_agent?: string; requested_by: string; chosen?: GateOption };
}

/** What a custom board's card holds: its instruction answered as POST /v1/ask answers it. */
export interface BoardAnswer {
  instruction: string;
  answer: string;
  citations: AskCitation[];
  model: string;
}

export type Verdict = "accurate" | "inaccurate";

/** The members' verdicts on one answer of a custom board's card, and the caller's own. */
export interface CardFeedback {
  accurate: number;
  inaccurate: number;
  my_verdict?: Verdict;
}

/** A custom board's one card (`board:<board id>`). */
export interface AnswerSlot extends SlotBase {
  kind: "instruction_answer";
  payload: BoardAnswer;
  feedback: CardFeedback;
  content_updated_at: string;
  dream_run_id?: string;
}

/** GET …/board/slots/{slot_key}/history: an earlier answer, and when a newer one replaced it. */
export interface SlotVersion {
  id: string;
  payload: BoardAnswer;
  cite_memory_ids: string[];
  feedback: CardFeedback;
  content_produced_at: string;
  archived_at: string;
}
