import { z } from "zod";
import { listAgentSessionsQuerySchema, MAX_SESSIONS_WITH_CONTENT, putAgentSessionBodySchema } from "@/lib/agent-sessions/agent-session-fields.ts";
import { cursorSchema, DEFAULT_LIMIT, MAX_LIMIT } from "@/lib/api/pagination.ts";
import { DEFAULT_CONFIG_PAGE } from "@/lib/configs/list-configs.ts";
import { askBodySchema } from "@/lib/ask/ask-fields.ts";
import { apiKeyObjectSchema, createdApiKeySchema } from "@/lib/auth/api-key-object.ts";
import { createApiKeyBodySchema } from "@/lib/auth/create-api-key.ts";
import { updateApiKeyBodySchema } from "@/lib/auth/update-api-key.ts";
import {
  ackConfigsBodySchema,
  batchDeleteConfigsBodySchema,
  listConfigsQuerySchema,
  localDeleteBodySchema,
  MAX_CONFIGS_PER_USER,
  MAX_VERSIONS_KEPT,
  mergeConfigsBodySchema,
  restoreConfigBodySchema,
  syncConfigsBodySchema,
  upsertConfigBodySchema,
} from "@/lib/configs/config-fields.ts";
import { createBoardBodySchema, updateBoardBodySchema } from "@/lib/boards/custom-board-fields.ts";
import { requestDecisionBodySchema, resolveSlotBodySchema } from "@/lib/boards/decision-gate-fields.ts";
import { listDreamActionsQuerySchema, listDreamsQuerySchema } from "@/lib/dreams/dream-fields.ts";
import { resolveDreamActionBodySchema } from "@/lib/dreams/undo-dream-action.ts";
import {
  addMemberBodySchema,
  checkSlugQuerySchema,
  createHubBodySchema,
  createTransferBodySchema,
  listQuerySchema,
  updateHubBodySchema,
  updateMemberBodySchema,
} from "@/lib/hubs/hub-fields.ts";
import { hubListEntrySchema, hubObjectSchema, memberObjectSchema, transferObjectSchema } from "@/lib/hubs/hub-object.ts";
import { createInviteBodySchema } from "@/lib/invites/invite-fields.ts";
import { inviteObjectSchema } from "@/lib/invites/invite-object.ts";
import {
  batchDeleteBodySchema,
  batchMoveBodySchema,
  createMemoryBodySchema,
  listMemoriesQuerySchema,
  updateMemoryBodySchema,
} from "@/lib/memories/memory-fields.ts";
import { memoryObjectSchema, memoryWithContentSchema } from "@/lib/memories/memory-object.ts";
import { shareMemoryBodySchema } from "@/lib/memories/share-memory.ts";
import { listPersonasQuerySchema } from "@/lib/personas/list-personas.ts";
import { updateAgentBodySchema } from "@/lib/agents/update-agent.ts";
import {
  createChatSessionBodySchema,
  decideChatApprovalBodySchema,
  listChatMessagesQuerySchema,
  listChatSessionsQuerySchema,
  sendChatMessageBodySchema,
  updateChatSessionBodySchema,
} from "@/lib/chat/chat-fields.ts";
import {
  cancelChatMessageResultSchema,
  chatMessageObjectSchema,
  chatSessionObjectSchema,
  chatToolObjectSchema,
  decideChatApprovalResultSchema,
  regenerateChatMessageResultSchema,
  sendChatMessageResultSchema,
} from "@/lib/chat/chat-object.ts";
import { requestEmailCodeBodySchema, verifyEmailCodeBodySchema } from "@/lib/auth/email-code-fields.ts";
import { impersonateBodySchema } from "@/lib/auth/impersonate-user.ts";
import { notificationObjectSchema, notificationSummarySchema } from "@/lib/notifications/notification-object.ts";
import { bulkNotificationsBodySchema, resolveNotificationBodySchema } from "@/lib/notifications/update-notification.ts";
import { barSearchQuerySchema, recallBodySchema, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, searchMemoriesQuerySchema } from "@/lib/recall/recall-fields.ts";
import { recallResponseSchema } from "@/lib/recall/recall-object.ts";
import { settingsObjectSchema, updateSettingsBodySchema } from "@/lib/settings/settings-fields.ts";
import {
  assignMemoryBodySchema,
  createTopicBodySchema,
  reorderBodySchema,
  topicHubQuerySchema,
  updateTopicBodySchema,
} from "@/lib/topics/topic-fields.ts";
import { topicNodeSchema, topicObjectSchema, topicWithTotalSchema } from "@/lib/topics/topic-object.ts";
import { createUploadBodySchema } from "@/lib/uploads/create-upload.ts";
import { usageObjectSchema } from "@/lib/usage/usage-object.ts";
import { dreamUsageQuerySchema } from "@/lib/dreams/dream-usage.ts";
import { exchangeCliCodeBodySchema } from "@/lib/oauth/exchange-cli-code.ts";
import { refreshCliTokenBodySchema } from "@/lib/oauth/refresh-cli-token.ts";
import { adminCreateUserBodySchema } from "@/lib/users/admin-create-user.ts";
import { updateMeBodySchema } from "@/lib/users/get-me.ts";

export type Method = "get" | "post" | "put" | "patch" | "delete";

/** One documented operation: the zod schemas its route parses with, and the data its envelope carries. */
export interface Operation {
  method: Method;
  /** OpenAPI path, `{name}` for path parameters. */
  path: string;
  tag: string;
  summary: string;
  /** key: API key (or the dashboard session); none: public; admin: ENGRAM_ADMIN_TOKEN. Default key. */
  auth?: "key" | "none" | "admin";
  /**
   * The X-Hub-ID header picks (or ranks first) a hub: true where without it the personal hub is used
   * (or a hub-limited key's first hub), else what the operation does without it.
   */
  hubHeader?: true | string;
  /** The `limit` the route applies when it is not DEFAULT_LIMIT, clamped to MAX_LIMIT (parseLimit's defaults). */
  limit?: { default: number; max: number; note?: string };
  query?: z.ZodType;
  body?: z.ZodType;
  /** An empty body is accepted (treated as {}). */
  bodyOptional?: boolean;
  /** Success statuses (default [200]). */
  statuses?: number[];
  /** The `data` of the success envelope; omitted: a JSON object not described further. */
  data?: z.ZodType;
  /**
   * sse: text/event-stream; sse-or-json: SSE with Accept: text/event-stream, else the envelope; binary: a file; redirect: 302 with Location
   * (a browser step); document: a JSON body that is no envelope, described by `data`.
   */
  produces?: "json" | "sse" | "sse-or-json" | "binary" | "redirect" | "document";
  /** Extra request headers the route reads. */
  headers?: { name: string; description: string }[];
  /** Path parameters that are not plain ids (catch-alls). */
  pathParams?: Record<string, string>;
}

/** X-Hub-ID where it narrows a search or a list, which without it reads every hub. */
const EVERY_HUB_HEADER = "Only this hub (a hub_id parameter wins); without it every hub the caller can read";
/** X-Hub-ID on recall and ask: every readable hub is searched either way. */
const RANKED_FIRST_HEADER = "This hub's memories rank first; every hub the caller can read is searched either way";

const cursorPage = <K extends string>(key: K, item: z.ZodType) =>
  z.object({ [key]: z.array(item), next_cursor: z.string().meta({ description: '"" on the last page' }), has_more: z.boolean() } as Record<K | "next_cursor" | "has_more", z.ZodType>);

/**
 * GET /v1/notifications reads its query by hand (kind may repeat); this schema documents what it accepts.
 * The route is app/v1/notifications/route.ts.
 */
const listNotificationsQuerySchema = z.object({
  hub: z.string().optional().meta({ description: "Only this hub's notifications (hub_id is accepted too)" }),
  status: z.string().optional().meta({ description: "pending, resolved, dismissed or expired" }),
  kind: z.string().optional().meta({ description: "A kind, or several comma-separated (the parameter may repeat)" }),
  resolution: z.string().optional().meta({ description: "How resolved rows were resolved (accepted, declined, kept_a, …), comma-separated or repeated" }),
  unseen_only: z.enum(["true", "false", "1", "0"]).optional(),
  since: z.string().optional().meta({ description: "RFC 3339 timestamp" }),
  limit: z.string().optional(),
  cursor: cursorSchema.optional(),
});
const notificationSummaryQuerySchema = z.object({ hub: z.string().optional().meta({ description: "Only this hub's counts" }) });
const eventStreamQuerySchema = z.object({
  hub_id: z.string().optional(),
  types: z.string().optional().meta({ description: "Event types, comma-separated; `prefix.*` matches a family" }),
  last_event_id: z.string().optional().meta({ description: "Resume after this event (the Last-Event-ID header wins)" }),
});

const deleted = z.object({ id: z.string(), deleted: z.literal(true) });

/** GET /v1/auth/github|google read these two by hand (lib/oauth/start-cli-login.ts). */
const startCliLoginQuerySchema = z.object({
  redirect_uri: z
    .string()
    .regex(/^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?\/[^#]*$/)
    .meta({ description: "http on localhost, 127.0.0.1 or [::1], where the CLI waits for the code" }),
  state: z.string().optional().meta({ description: "Returned unchanged with the code" }),
});
const connectedAgentSchema = z.object({
  id: z.string(),
  owner_id: z.string(),
  agent_name: z.string(),
  display_name: z.string(),
  icon: z.string(),
  status: z.enum(["active", "disconnected"]),
  created_at: z.string(),
  updated_at: z.string(),
  key_count: z.int(),
  config_count: z.int(),
  memory_count: z.int(),
  needs_reconnect: z.boolean(),
  last_active_at: z.string().nullable(),
});
const searchResultSchema = z.object({
  memory_id: z.string(),
  title: z.string(),
  snippet: z.string(),
  kind: z.string(),
  stability: z.string(),
  heading_chain: z.string().optional(),
  hub_id: z.string(),
  hub_name: z.string(),
  topic_id: z.string().optional(),
  topic_name: z.string().optional(),
});
const instructionAnswerSchema = z.object({
  instruction: z.string(),
  answer: z.string(),
  citations: z.array(z.object({ index: z.int(), memory_id: z.string(), title: z.string(), kind: z.string() })),
  model: z.string(),
});
const cardFeedbackSchema = z
  .object({ accurate: z.int(), inaccurate: z.int(), my_verdict: z.enum(["accurate", "inaccurate"]).optional() })
  .meta({ description: "Members' verdicts on this answer of a custom board's card, and the caller's own" });
const boardSlotSchema = z.object({
  id: z.string(),
  board_id: z.string(),
  slot_key: z.string(),
  kind: z.string().meta({ description: "decision_gate on the hub's own board, instruction_answer on a custom board" }),
  title: z.string(),
  payload: z.union([
    z.object({
      question: z.string(),
      options: z.array(z.object({ id: z.string(), label: z.string() })),
      context: z.string().optional(),
      source_agent: z.string().optional(),
      requested_by: z.string(),
      chosen: z.object({ id: z.string(), label: z.string() }).optional(),
    }),
    instructionAnswerSchema,
  ]),
  cite_memory_ids: z.array(z.string()),
  state: z.enum(["fresh", "seen", "resolved", "dismissed"]),
  resolution: z.object({ action: z.string(), verdict: z.enum(["accurate", "inaccurate"]).optional(), resolved_by: z.string(), resolved_at: z.string() }).optional(),
  feedback: cardFeedbackSchema.optional(),
  dream_run_id: z.string().optional(),
  created_at: z.string(),
  updated_at: z.string(),
  content_updated_at: z.string().optional(),
});
const boardSchema = z.object({
  id: z.string(),
  hub_id: z.string(),
  created_by: z.string(),
  kind: z.enum(["system", "custom"]),
  title: z.string(),
  instruction: z.string().optional(),
  status: z.enum(["active", "cooking", "paused"]),
  created_at: z.string(),
  updated_at: z.string(),
});
const boardWithSlotsSchema = z.object({ board: boardSchema, slots: z.array(boardSlotSchema) });
const cardVersionSchema = z.object({
  id: z.string(),
  board_id: z.string(),
  slot_key: z.string(),
  kind: z.string(),
  title: z.string(),
  payload: instructionAnswerSchema,
  cite_memory_ids: z.array(z.string()),
  feedback: cardFeedbackSchema,
  dream_run_id: z.string().optional(),
  content_produced_at: z.string(),
  archived_at: z.string(),
});
const cliTokenPairSchema = z.object({ access_token: z.string(), refresh_token: z.string(), expires_in: z.number(), token_type: z.literal("Bearer"), scope: z.string() });

/** Every operation under /v1 (tests/openapi-coverage.test.ts fails when a route file exports one not listed here). */
export const OPERATIONS: Operation[] = [
  // System
  { method: "get", path: "/v1/health", tag: "System", summary: "Liveness and database check", auth: "none" },
  {
    method: "get",
    path: "/v1/openapi.json",
    tag: "System",
    summary: "This OpenAPI 3.1 document, as it is (not in an envelope)",
    auth: "none",
    produces: "document",
    data: z.object({ openapi: z.string(), info: z.object({ title: z.string(), version: z.string() }).loose(), paths: z.record(z.string(), z.unknown()) }).loose(),
  },
  { method: "post", path: "/v1/admin/users", tag: "System", summary: "Bootstrap a user and their first API key (ENGRAM_ADMIN_TOKEN; 404 when unset)", auth: "admin", body: adminCreateUserBodySchema, statuses: [201] },
  {
    method: "delete",
    path: "/v1/account/data",
    tag: "Account",
    summary: "Empty the account and keep it: the personal hub's memories (in batches), files, topics, gates and dream runs, synced configs, agent sessions, agent names, notifications and pending uploads. A deletion cut short is finished by a sweep: 202 { deleted: false, status: pending } when this request failed partway, or stopped after 200 batches of a large account, and the sweep finishes it; 409 when the sweep gave it up meanwhile. Team hubs keep what you pushed there",
    data: z.union([z.object({ deleted: z.literal(true), memories: z.int(), topics: z.int(), configs: z.int(), sessions: z.int() }), z.object({ deleted: z.literal(false), status: z.literal("pending") })]),
    statuses: [200, 202],
  },
  {
    method: "get",
    path: "/v1/plans",
    tag: "Account",
    summary: "This install's plans: one for people (self_hosted), one for team hubs (self_hosted_team), free, with the limits the server enforces (-1 or null: none)",
    data: z.array(z.object({ id: z.string(), scope: z.enum(["personal", "hub"]), display_name: z.string(), monthly_price_cents: z.int(), memory_limit: z.int(), storage_bytes_limit: z.int(), max_hub_members: z.int().nullable(), rate_limit_rpm: z.int(), features: z.record(z.string(), z.unknown()), active: z.boolean() }).loose()),
  },
  { method: "get", path: "/v1/usage", tag: "Account", summary: "This month's pushes, recalls and asks, storage, synced config bytes, and the server's limits", data: usageObjectSchema },
  { method: "get", path: "/v1/usage/dreams", tag: "Account", summary: "This month's dream runs of a hub (hub_id, else X-Hub-ID, else the personal hub); self-hosted: no quota (limit -1)", hubHeader: true, query: dreamUsageQuerySchema },
  { method: "get", path: "/v1/settings", tag: "Account", summary: "The caller's preferences, the dream tuning of the hubs they own, and their personal hub's dream switches (docs/dreams.md)", data: settingsObjectSchema },
  {
    method: "patch",
    path: "/v1/settings",
    tag: "Account",
    summary: "Change preferences (known keys only; a value out of range is a 400 naming it). dev_flags merge flag by flag; dreams_excluded_kinds and pulse_hidden_hub_ids are replaced. The five dream switches are per hub (PATCH /v1/hubs/{id} settings): here they are a 400 moved_to_hub_settings",
    body: updateSettingsBodySchema,
    data: settingsObjectSchema,
  },

  // Auth
  { method: "get", path: "/v1/auth/me", tag: "Account", summary: "Who the credential belongs to" },
  { method: "patch", path: "/v1/auth/me", tag: "Account", summary: "Rename the calling user", body: updateMeBodySchema },
  {
    method: "post",
    path: "/v1/auth/impersonate",
    tag: "System",
    summary: "With ENGRAM_ADMIN_TOKEN: a 15-minute access token acting as a user (by user_id or email), shown to them as a connected app; 404 when the token is unset",
    auth: "admin",
    body: impersonateBodySchema,
    data: z.object({ access_token: z.string(), expires_in: z.int(), target_id: z.string(), impersonated: z.literal(true) }),
  },
  {
    method: "post",
    path: "/v1/auth/email/request",
    tag: "Account",
    summary: "Mail a six-digit sign-in code (10 minutes, once, 5 tries; one a minute and 5 an hour per address, ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR (100) an hour per client); the same answer whether or not the address has an account. 403 (off) without SMTP_URL",
    auth: "none",
    body: requestEmailCodeBodySchema,
    data: z.object({ status: z.literal("sent"), expires_in: z.int(), email: z.string(), cooldown: z.int(), dev_code: z.string().optional() }),
  },
  {
    method: "post",
    path: "/v1/auth/email/verify",
    tag: "Account",
    summary: "A right code signs in (an account is made when sign-up is open): the token pair, or, when the code was asked with a redirect_uri, a code for /v1/auth/exchange and the redirect",
    auth: "none",
    body: verifyEmailCodeBodySchema,
    data: z.union([
      z.object({ access_token: z.string(), token_type: z.string(), expires_in: z.int(), refresh_token: z.string(), scope: z.string() }),
      z.object({ status: z.literal("ok"), code: z.string(), redirect: z.string(), user_id: z.string() }),
    ]),
  },
  {
    method: "get",
    path: "/v1/auth/identities",
    tag: "Account",
    summary: "The GitHub / Google accounts that sign the caller in, oldest first (at most 100); email and name as the provider gave them at the last sign-in",
    data: z.array(z.object({ id: z.string(), user_id: z.string(), provider: z.string(), provider_id: z.string(), provider_email: z.string(), provider_name: z.string(), created_at: z.string() })),
  },
  {
    method: "get",
    path: "/v1/auth/link/{provider}",
    tag: "Account",
    summary: "Opened in a browser signed in to the dashboard: add a GitHub or Google account to its ways in, through the provider's sign-in, then on to redirect_uri (a page of this site). Without a session the browser signs in first; a provider not configured is 404",
    auth: "none",
    query: z.object({ redirect_uri: z.string().optional().meta({ description: "a path or URL of this site (default /hubs)" }) }),
    produces: "redirect",
  },
  {
    method: "delete",
    path: "/v1/auth/link/{provider}",
    tag: "Account",
    summary: "Stop a provider's accounts (github, google) signing the caller in; 409 when it is the last way in (no password, no other provider)",
    data: z.object({ status: z.literal("unlinked") }),
  },
  {
    method: "get",
    path: "/v1/personas",
    tag: "Agent configs",
    summary: "Personas read from the caller's synced identity files (SOUL.md, IDENTITY.md, PERSONA.md, personas/*.md), named by their first heading, newest change first; a page (default and at most 500, every persona) holds at most 8 MiB of content",
    query: listPersonasQuerySchema,
    limit: { default: MAX_CONFIGS_PER_USER, max: MAX_CONFIGS_PER_USER },
    data: z.object({
      personas: z.array(z.object({ id: z.string(), owner_id: z.string(), source_agent: z.string(), source_scope: z.string(), source_file_path: z.string(), name: z.string(), content: z.string(), content_hash: z.string(), version: z.int(), created_at: z.string(), updated_at: z.string() })),
      next_cursor: z.string(),
      has_more: z.boolean(),
    }),
  },
  { method: "delete", path: "/v1/personas/{id}", tag: "Agent configs", summary: "Drop a persona from the list; its file stays, and a change to it brings the persona back", data: z.object({ deleted: z.boolean() }) },
  {
    method: "get",
    path: "/v1/personas/{id}/revisions",
    tag: "Agent configs",
    summary: "The persona file's stored versions (at most 50 kept), newest first, without content; paginated (limit default 50 = every kept version, max 100)",
    query: listQuerySchema,
    limit: { default: MAX_VERSIONS_KEPT, max: MAX_LIMIT },
    data: z.object({
      revisions: z.array(z.object({ id: z.string(), persona_id: z.string(), owner_id: z.string(), version: z.int(), content: z.string().optional(), content_hash: z.string(), created_at: z.string() })),
      next_cursor: z.string(),
      has_more: z.boolean(),
    }),
  },
  { method: "get", path: "/v1/personas/{id}/revisions/{version}", tag: "Agent configs", summary: "One stored version with its content", data: z.object({ id: z.string(), persona_id: z.string(), owner_id: z.string(), version: z.int(), content: z.string().optional(), content_hash: z.string(), created_at: z.string() }) },
  {
    method: "post",
    path: "/v1/personas/{id}/revisions/{version}/restore",
    tag: "Agent configs",
    summary: "Write that version back into the file as a new version (none when the file already has that content)",
    data: z.object({ persona_id: z.string(), restored_version: z.int(), head_version: z.int() }),
  },
  { method: "get", path: "/v1/agents", tag: "API keys", summary: "The caller's connected agents (named by their keys, synced configs and renames) with counts, most recently active first (at most 100)", data: z.array(connectedAgentSchema) },
  { method: "patch", path: "/v1/agents/{slug}", tag: "API keys", summary: "Rename an agent or set its icon (\"\" goes back to the default); `slug` is its agent_name", body: updateAgentBodySchema, data: connectedAgentSchema },
  {
    method: "delete",
    path: "/v1/agents/{slug}",
    tag: "API keys",
    summary: "Disconnect an agent: revoke its keys and delete its synced configs (restorable); memories stay. Always 200, an unknown agent as a not_found skip",
    data: z.object({ disconnected: z.boolean(), keys_revoked: z.int(), configs_tombstoned: z.int(), skipped: z.array(z.object({ id: z.string(), reason: z.literal("not_found") })) }),
  },
  { method: "get", path: "/v1/auth/api-keys", tag: "API keys", summary: "The caller's active keys, without secrets (at most 100)", data: z.array(apiKeyObjectSchema) },
  { method: "post", path: "/v1/auth/api-keys", tag: "API keys", summary: "Issue a key; the secret is in this response only", body: createApiKeyBodySchema, statuses: [201], data: createdApiKeySchema },
  {
    method: "patch",
    path: "/v1/auth/api-keys/{id}",
    tag: "API keys",
    summary: "Set the key's agent name or standalone flag",
    body: updateApiKeyBodySchema,
    data: z.object({ id: z.string(), agent_name: z.string(), standalone: z.boolean() }),
  },
  {
    method: "delete",
    path: "/v1/auth/api-keys/{id}",
    tag: "API keys",
    summary: "Revoke one of the caller's keys",
    data: z.object({ id: z.string(), revoked: z.boolean(), skipped: z.array(z.object({ id: z.string(), reason: z.string() })) }),
  },
  {
    method: "get",
    path: "/v1/auth/github",
    tag: "Account",
    summary: "Where `memax login` opens the browser: sign in, consent, then a code to the CLI's loopback redirect_uri (`/v1/auth/google` is the same)",
    auth: "none",
    query: startCliLoginQuerySchema,
    produces: "redirect",
  },
  { method: "get", path: "/v1/auth/google", tag: "Account", summary: "The same as /v1/auth/github (`memax login --provider google`)", auth: "none", query: startCliLoginQuerySchema, produces: "redirect" },
  { method: "post", path: "/v1/auth/exchange", tag: "Account", summary: "The CLI's single-use sign-in code for an access token (1 hour) and a refresh token", auth: "none", body: exchangeCliCodeBodySchema, data: cliTokenPairSchema },
  { method: "post", path: "/v1/auth/refresh", tag: "Account", summary: "Rotate the CLI's refresh token for a new pair (a replayed token ends the sign-in)", auth: "none", body: refreshCliTokenBodySchema, data: cliTokenPairSchema },
  { method: "get", path: "/v1/auth/oauth-grants", tag: "API keys", summary: "Apps connected through OAuth (MCP clients)", query: listQuerySchema },
  { method: "delete", path: "/v1/auth/oauth-grants/{id}", tag: "API keys", summary: "Disconnect an app: its tokens stop working at once" },

  // Memories
  { method: "post", path: "/v1/memories", tag: "Memories", summary: "Push a memory (201 when new, 200 when it deduplicated)", hubHeader: true, body: createMemoryBodySchema, statuses: [200, 201], data: memoryObjectSchema },
  {
    method: "get",
    path: "/v1/memories",
    tag: "Memories",
    summary: "Memories of every readable hub (or of hub_id, else of X-Hub-ID), newest or most used first",
    hubHeader: EVERY_HUB_HEADER,
    query: listMemoriesQuerySchema,
    data: cursorPage("memories", memoryObjectSchema).extend({ total: z.int() }),
  },
  { method: "get", path: "/v1/memories/{id}", tag: "Memories", summary: "One memory with content and attachments", data: memoryWithContentSchema },
  { method: "patch", path: "/v1/memories/{id}", tag: "Memories", summary: "Change title, tags, content, classification or archive state; answers the memory with content and attachments", body: updateMemoryBodySchema, data: memoryWithContentSchema },
  { method: "delete", path: "/v1/memories/{id}", tag: "Memories", summary: "Delete a memory with its chunks and attachments", data: deleted },
  {
    method: "get",
    path: "/v1/memories/search",
    tag: "Memories",
    summary: "Quick word search without embeddings: BM25 over chunks, then titles containing the text; one row per memory, a plain array of at most `limit` (default 10, max 50)",
    hubHeader: EVERY_HUB_HEADER,
    limit: { default: SEARCH_DEFAULT_LIMIT, max: SEARCH_MAX_LIMIT },
    query: searchMemoriesQuerySchema,
    data: z.array(searchResultSchema),
  },
  {
    method: "get",
    path: "/v1/bar/search",
    tag: "Memories",
    summary: "A search bar's quick matches in one request: memories as the quick search finds them, topics (name or description) and readable hubs (name) containing the text; an empty q gives empty lists; `limit` (default 10, max 50) bounds each list",
    hubHeader: EVERY_HUB_HEADER,
    limit: { default: SEARCH_DEFAULT_LIMIT, max: SEARCH_MAX_LIMIT },
    query: barSearchQuerySchema,
    data: z.object({
      query: z.string(),
      memories: z.array(searchResultSchema),
      topics: z.array(z.object({ id: z.string(), name: z.string(), description: z.string().optional(), hub_id: z.string() })),
      hubs: z.array(z.object({ id: z.string(), name: z.string() })),
    }),
  },
  {
    method: "post",
    path: "/v1/memories/{id}/share",
    tag: "Memories",
    summary: "Copy a readable memory into another hub you can write to, as it reads now (a file or link as its extracted text); 201 with the copy, 200 when that hub already holds the same text",
    body: shareMemoryBodySchema,
    data: memoryObjectSchema,
    statuses: [200, 201],
  },
  {
    method: "get",
    path: "/v1/memories/{id}/related",
    tag: "Memories",
    summary: "Up to five similar memories",
    data: z.array(z.object({ memory: memoryObjectSchema, similarity: z.number() })),
  },
  {
    method: "post",
    path: "/v1/memories/{id}/access",
    tag: "Memories",
    summary: "Signal a deliberate view: one access, unless the caller's read of it was counted within the last minute",
    data: z.object({ id: z.string(), access_count: z.int(), accessed_at: z.string(), counted: z.boolean() }),
  },
  { method: "post", path: "/v1/memories/batch-delete", tag: "Memories", summary: "Delete up to 100 memories; the rest are reported as skipped", body: batchDeleteBodySchema },
  { method: "post", path: "/v1/memories/batch-move", tag: "Memories", summary: "Move up to 100 memories to another hub and/or topic", body: batchMoveBodySchema },
  { method: "get", path: "/v1/memories/{id}/attachments/{attachmentId}/download", tag: "Memories", summary: "The original file, streamed", produces: "binary" },
  { method: "post", path: "/v1/memories/{id}/attachments/{attachmentId}/view-url", tag: "Memories", summary: "A short-lived signed URL to show an image inline" },
  { method: "post", path: "/v1/uploads", tag: "Memories", summary: "A signed PUT target for a file a memory will then attach", hubHeader: true, body: createUploadBodySchema, statuses: [201] },
  {
    method: "put",
    path: "/v1/blobs/{key}",
    tag: "Memories",
    summary: "The embedded blob store receives an upload through its signed URL",
    auth: "none",
    pathParams: { key: "The object key (may contain slashes)" },
    headers: [],
  },
  { method: "get", path: "/v1/blobs/{key}", tag: "Memories", summary: "The embedded blob store serves a file through its signed URL", auth: "none", produces: "binary", pathParams: { key: "The object key (may contain slashes)" } },

  // Recall and ask
  { method: "post", path: "/v1/recall", tag: "Recall", summary: "Hybrid search over every hub the caller can read", hubHeader: RANKED_FIRST_HEADER, body: recallBodySchema, data: recallResponseSchema },
  { method: "post", path: "/v1/ask", tag: "Recall", summary: "An answer from recall's sources with citations (SSE with Accept: text/event-stream)", hubHeader: RANKED_FIRST_HEADER, body: askBodySchema, produces: "sse-or-json" },
  { method: "get", path: "/v1/events/stream", tag: "Recall", summary: "Server-sent events of the caller's hubs", query: eventStreamQuerySchema, produces: "sse", headers: [{ name: "Last-Event-ID", description: "Resume after this event" }] },

  // Hubs
  { method: "get", path: "/v1/hubs", tag: "Hubs", summary: "Every hub the caller belongs to, with role and counts (at most 100)", data: z.array(hubListEntrySchema) },
  { method: "post", path: "/v1/hubs", tag: "Hubs", summary: "Create a team hub owned by the caller", body: createHubBodySchema, statuses: [201], data: hubObjectSchema },
  { method: "get", path: "/v1/hubs/check-slug", tag: "Hubs", summary: "Whether a slug is free for a new hub", query: checkSlugQuerySchema },
  {
    method: "get",
    path: "/v1/hubs/{id}",
    tag: "Hubs",
    summary: "Settings, the first 100 members, the caller's role, counts and any pending transfer",
    data: z.object({
      hub: hubObjectSchema,
      role: z.string(),
      members: z.array(memberObjectSchema),
      members_has_more: z.boolean(),
      counts: z.record(z.string(), z.int()),
      pending_transfer: transferObjectSchema.nullable(),
    }),
  },
  { method: "patch", path: "/v1/hubs/{id}", tag: "Hubs", summary: "Rename, change the slug or contributor permissions", body: updateHubBodySchema, data: hubObjectSchema },
  { method: "delete", path: "/v1/hubs/{id}", tag: "Hubs", summary: "Delete a team hub and everything in it (owner only)", data: z.object({ id: z.string(), hub_id: z.string(), deleted: z.literal(true) }) },
  { method: "get", path: "/v1/hubs/{id}/summary", tag: "Hubs", summary: "Counts, stats, greeting and the caller's role" },
  { method: "post", path: "/v1/hubs/{id}/visit", tag: "Hubs", summary: "Record that the caller looked at the hub" },
  { method: "get", path: "/v1/hubs/{id}/board", tag: "Boards", summary: "The hub's board: open decision gates first, then up to 20 recently settled ones", data: boardWithSlotsSchema },
  { method: "get", path: "/v1/hubs/{id}/boards", tag: "Boards", summary: "The hub's boards: its own (id: the hub's), then its custom boards", data: z.object({ boards: z.array(boardSchema) }) },
  { method: "post", path: "/v1/hubs/{id}/boards", tag: "Boards", summary: "A custom board answering a standing instruction from the hub's memories; cooking until its first card is written (at once, then on every dream run); at most 10 a hub", body: createBoardBodySchema, statuses: [201], data: z.object({ board: boardSchema }) },
  { method: "get", path: "/v1/hubs/{id}/boards/{board_id}", tag: "Boards", summary: "One board with its cards: the hub's own as GET /v1/hubs/{id}/board, or a custom board with its card", data: boardWithSlotsSchema },
  { method: "patch", path: "/v1/hubs/{id}/boards/{board_id}", tag: "Boards", summary: "A custom board's title, instruction (the card is emptied and the board cooks again) or status (active, paused); its creator or a hub admin", body: updateBoardBodySchema, data: z.object({ board: boardSchema }) },
  { method: "delete", path: "/v1/hubs/{id}/boards/{board_id}", tag: "Boards", summary: "Delete a custom board; its creator or a hub admin", data: z.object({ deleted: z.literal(true) }) },
  { method: "get", path: "/v1/hubs/{id}/board/slots/{slot_key}/history", tag: "Boards", summary: "A card's earlier contents, newest first: a custom board's card keeps its last 20; a decision gate's question never changes, so it has none", data: z.object({ versions: z.array(cardVersionSchema) }) },
  {
    method: "post",
    path: "/v1/hubs/{id}/board/decision-gate",
    tag: "Boards",
    summary: "Ask the caller's person to choose among 2–4 options: a board card and a pending notification; the answer becomes a memory (409 gate_limit past 3 open)",
    body: requestDecisionBodySchema,
    statuses: [201],
    data: z.object({ slot: boardSlotSchema }),
  },
  {
    method: "post",
    path: "/v1/hubs/{id}/board/slots/{slot_key}/resolve",
    tag: "Boards",
    summary:
      "Answer a decision gate (choose, with an option's id or text), dismiss it, or reopen it; acknowledge, dismiss or reopen a custom board's card, or give it feedback (a verdict: accurate or inaccurate, recorded even on a settled card); a settled card answers with its state",
    body: resolveSlotBodySchema,
    data: z.object({ slot: boardSlotSchema }),
    pathParams: { slot_key: "The card's slot_key (`decision:<id>`)" },
  },
  { method: "post", path: "/v1/hubs/{id}/leave", tag: "Hubs", summary: "End the caller's own membership" },
  { method: "get", path: "/v1/hubs/{id}/members", tag: "Members", summary: "All members, paginated", query: listQuerySchema, data: cursorPage("members", memberObjectSchema) },
  { method: "post", path: "/v1/hubs/{id}/members", tag: "Members", summary: "Add a user the caller can find (invited by e-mail) with a role", body: addMemberBodySchema, statuses: [201], data: memberObjectSchema },
  {
    method: "patch",
    path: "/v1/hubs/{id}/members/{user_id}",
    tag: "Members",
    summary: "Change a member's role",
    body: updateMemberBodySchema,
    data: memberObjectSchema.extend({ status: z.literal("updated") }),
  },
  {
    method: "delete",
    path: "/v1/hubs/{id}/members/{user_id}",
    tag: "Members",
    summary: "Remove a member from the hub",
    data: z.object({ user_id: z.string(), removed: z.literal(true), status: z.literal("removed") }),
  },
  { method: "post", path: "/v1/hubs/{id}/ownership-transfer", tag: "Members", summary: "Offer the hub to another member (owner only, 7 days)", body: createTransferBodySchema, statuses: [201] },
  { method: "post", path: "/v1/hubs/{id}/ownership-transfer/{transfer_id}/accept", tag: "Members", summary: "The target takes over the hub" },
  { method: "post", path: "/v1/hubs/{id}/ownership-transfer/{transfer_id}/cancel", tag: "Members", summary: "The owner withdraws or the target declines" },

  // Invites
  { method: "get", path: "/v1/hubs/{id}/mail", tag: "Invites", summary: "The hub's mail outbox (invites sent by e-mail), newest first; owner or admin", query: listQuerySchema },
  { method: "get", path: "/v1/hubs/{id}/invites", tag: "Invites", summary: "Usable invites, without tokens (at most 20 per hub), then at most 20 whose maker can no longer grant them, as revoked", data: z.array(inviteObjectSchema) },
  {
    method: "post",
    path: "/v1/hubs/{id}/invites",
    tag: "Invites",
    summary: "Create a join link; the token is in this response only",
    body: createInviteBodySchema,
    bodyOptional: true,
    statuses: [201],
    data: inviteObjectSchema.extend({ delivery: z.object({ status: z.string() }).loose().optional() }),
  },
  { method: "delete", path: "/v1/hubs/{id}/invites/{invite_id}", tag: "Invites", summary: "Revoke an invite" },
  { method: "post", path: "/v1/hubs/{id}/invites/{invite_id}/regenerate", tag: "Invites", summary: "New token and expiry; the old link dies", data: inviteObjectSchema },
  { method: "post", path: "/v1/hubs/{id}/invites/{invite_id}/resend", tag: "Invites", summary: "E-mail the same link again" },
  {
    method: "get",
    path: "/v1/invites/{token}",
    tag: "Invites",
    summary: "What the join page shows (public; rate-limited per client address)",
    auth: "none",
    data: z.object({
      invite: z.object({
        id: z.string(),
        hub_id: z.string(),
        role: z.string(),
        created_at: z.string(),
        expires_at: z.string(),
        state: z.string().meta({ description: "active, or revoked, expired or accepted: the link no longer admits anyone" }),
      }),
      hub: z.object({ id: z.string(), name: z.string(), slug: z.string(), hub_type: z.string(), owner_id: z.string(), icon: z.string().optional(), accent: z.string().optional() }),
      member_count: z.int(),
      invited_by: z.string(),
    }),
  },
  { method: "post", path: "/v1/invites/{token}/accept", tag: "Invites", summary: "Join the invite's hub with its role (single use)", data: z.object({ hub: hubObjectSchema, role: z.string() }) },

  // Topics
  {
    method: "get",
    path: "/v1/topics",
    tag: "Topics",
    summary: "One hub's whole topic tree with memory counts",
    hubHeader: true,
    query: topicHubQuerySchema,
    data: z.object({ topics: z.array(topicNodeSchema), unassigned_count: z.int() }),
  },
  { method: "post", path: "/v1/topics", tag: "Topics", summary: "Create a topic", hubHeader: true, body: createTopicBodySchema, statuses: [201], data: topicNodeSchema },
  { method: "get", path: "/v1/topics/archived", tag: "Topics", summary: "A hub's archived topics, most recently archived first", hubHeader: true, query: topicHubQuerySchema },
  { method: "post", path: "/v1/topics/reorder", tag: "Topics", summary: "New positions (and parents) for many topics of one hub, all or nothing", body: reorderBodySchema },
  { method: "get", path: "/v1/topics/{id}", tag: "Topics", summary: "One topic with its memory counts", data: topicWithTotalSchema },
  { method: "patch", path: "/v1/topics/{id}", tag: "Topics", summary: "Rename, describe, pin, reorder or move a topic", body: updateTopicBodySchema, data: topicObjectSchema },
  {
    method: "delete",
    path: "/v1/topics/{id}",
    tag: "Topics",
    summary: "Delete a topic and its subtopics; their memories stay",
    data: z.object({ id: z.string(), topic_id: z.string(), deleted: z.literal(true), deleted_count: z.int() }),
  },
  { method: "post", path: "/v1/topics/{id}/archive", tag: "Topics", summary: "Archive a topic and its subtopics" },
  { method: "post", path: "/v1/topics/{id}/visit", tag: "Topics", summary: "Record that the caller opened the topic" },
  { method: "post", path: "/v1/topics/{id}/restore", tag: "Topics", summary: "Bring back an archived topic and its subtopics" },
  { method: "get", path: "/v1/topics/{id}/memories", tag: "Topics", summary: "The memories filed under this topic, paginated", query: listQuerySchema },
  { method: "post", path: "/v1/topics/{id}/memories", tag: "Topics", summary: "File a memory of the topic's hub under it", body: assignMemoryBodySchema },
  { method: "delete", path: "/v1/topics/{id}/memories/{memory_id}", tag: "Topics", summary: "Take a memory out of this topic" },

  // Notifications
  {
    method: "get",
    path: "/v1/notifications",
    tag: "Notifications",
    summary: "The caller's notifications, newest first",
    query: listNotificationsQuerySchema,
    data: cursorPage("notifications", notificationObjectSchema),
  },
  { method: "get", path: "/v1/notifications/summary", tag: "Notifications", summary: "Pending and unseen counts by kind", query: notificationSummaryQuerySchema, data: notificationSummarySchema },
  { method: "post", path: "/v1/notifications/seen", tag: "Notifications", summary: "Mark receipt kinds seen in bulk", hubHeader: "Only this hub's notifications (the body's hub wins); without it every hub's", body: bulkNotificationsBodySchema },
  { method: "post", path: "/v1/notifications/dismiss", tag: "Notifications", summary: "Dismiss receipt kinds in bulk", hubHeader: "Only this hub's notifications (the body's hub wins); without it every hub's", body: bulkNotificationsBodySchema },
  { method: "post", path: "/v1/notifications/{id}/seen", tag: "Notifications", summary: "Mark one notification seen (idempotent)" },
  { method: "post", path: "/v1/notifications/{id}/dismiss", tag: "Notifications", summary: "Dismiss a receipt (decisions go through resolve)" },
  { method: "post", path: "/v1/notifications/{id}/resolve", tag: "Notifications", summary: "Accept or decline an invite or an ownership transfer", body: resolveNotificationBodySchema },
  { method: "post", path: "/v1/notifications/{id}/items/{item_id}/view", tag: "Notifications", summary: "A checklist or digest item is seen (idempotent); other kinds 400 kind_not_supported", data: z.object({ item_id: z.string(), viewed_at: z.string().optional(), completed_at: z.string().optional(), progress: z.object({ current: z.int(), target: z.int() }).optional(), auto_resolved: z.boolean().optional(), auto_resolved_as: z.literal("applied_auto").optional() }) },
  {
    method: "post",
    path: "/v1/notifications/{id}/items/{item_id}/complete",
    tag: "Notifications",
    summary: "A checklist item is done (idempotent); 400 item_locked while its locked_by items are not; the last required item resolves the checklist (applied_auto)",
    data: z.object({ item_id: z.string(), viewed_at: z.string().optional(), completed_at: z.string().optional(), progress: z.object({ current: z.int(), target: z.int() }).optional(), auto_resolved: z.boolean().optional(), auto_resolved_as: z.literal("applied_auto").optional() }),
  },
  { method: "get", path: "/v1/onboarding/state", tag: "Notifications", summary: "Whether a getting-started checklist was ever started, its latest version and status", data: z.object({ has_prior: z.boolean(), current_version: z.int(), current_status: z.string().optional() }) },
  { method: "post", path: "/v1/onboarding/restart", tag: "Notifications", summary: "Start the getting-started checklist (again): the pending one is dismissed, the next version begins with what the account has done ticked; 3 a day", statuses: [201], data: notificationObjectSchema },

  // Dreams
  { method: "get", path: "/v1/dreams", tag: "Dreams", summary: "Dream runs of every readable hub, newest first", query: listDreamsQuerySchema },
  { method: "post", path: "/v1/dreams/trigger", tag: "Dreams", summary: "Queue a dream run for the hub (one at a time per hub)", hubHeader: true, statuses: [202] },
  { method: "get", path: "/v1/dreams/report", tag: "Dreams", summary: "The hub's latest run with its actions and open reviews", hubHeader: true },
  { method: "get", path: "/v1/dreams/{id}", tag: "Dreams", summary: "One dream run with its counts and report" },
  { method: "get", path: "/v1/dreams/{id}/actions", tag: "Dreams", summary: "Everything the run did, in order", query: listDreamActionsQuerySchema },
  { method: "post", path: "/v1/dreams/actions/{id}/resolve", tag: "Dreams", summary: "Settle a contradiction", body: resolveDreamActionBodySchema },
  { method: "post", path: "/v1/dreams/actions/{id}/undo", tag: "Dreams", summary: "Undo one dream action" },

  // Agent chat
  { method: "get", path: "/v1/chat/tools", tag: "Chat", summary: "The chat agent's tools: which run here, which need approval, which are on by default", data: z.array(chatToolObjectSchema) },
  { method: "get", path: "/v1/chat/sessions", tag: "Chat", summary: "The caller's chat sessions, most recently active first (archived=true for the archived ones, pinned=true for pinned)", query: listChatSessionsQuerySchema, data: cursorPage("sessions", chatSessionObjectSchema) },
  { method: "post", path: "/v1/chat/sessions", tag: "Chat", summary: "Start a chat over every hub, one hub or a few (checked again on every turn)", body: createChatSessionBodySchema, statuses: [201], data: chatSessionObjectSchema },
  { method: "get", path: "/v1/chat/sessions/{id}", tag: "Chat", summary: "One chat session", data: chatSessionObjectSchema },
  { method: "patch", path: "/v1/chat/sessions/{id}", tag: "Chat", summary: "Title, pin, archive, tools, write hub or persona; the scope cannot change", body: updateChatSessionBodySchema, data: chatSessionObjectSchema },
  { method: "delete", path: "/v1/chat/sessions/{id}", tag: "Chat", summary: "Delete a session; a turn in flight is canceled", data: deleted },
  { method: "get", path: "/v1/chat/sessions/{id}/messages", tag: "Chat", summary: "The conversation, oldest first (an answer replaced by a regenerated one is left out)", query: listChatMessagesQuerySchema, data: cursorPage("messages", chatMessageObjectSchema) },
  {
    method: "post",
    path: "/v1/chat/sessions/{id}/messages",
    tag: "Chat",
    summary: "Send a message: 202 with the queued answer and its stream, 200 when a retry with the same idempotency_key finds the answer finished; 409 chat_session_locked while a turn runs",
    body: sendChatMessageBodySchema,
    statuses: [200, 202],
    data: sendChatMessageResultSchema,
  },
  { method: "get", path: "/v1/chat/sessions/{id}/messages/{messageId}", tag: "Chat", summary: "One message as it stands", data: chatMessageObjectSchema },
  {
    method: "get",
    path: "/v1/chat/sessions/{id}/messages/{messageId}/stream",
    tag: "Chat",
    summary: "The answer's events (message.tool_call, message.tool_result, approval.required, approval.decided, cancel.requested, message.text, then message.completed, partial_failed, failed or canceled), each with id: seq; replayable for 24 hours",
    produces: "sse",
    headers: [{ name: "Last-Event-ID", description: "Only the events after this seq" }],
  },
  { method: "post", path: "/v1/chat/sessions/{id}/messages/{messageId}/cancel", tag: "Chat", summary: "Stop an answer in flight (a finished one is left as it is: cancel_registered false)", data: cancelChatMessageResultSchema },
  { method: "post", path: "/v1/chat/sessions/{id}/messages/{messageId}/regenerate", tag: "Chat", summary: "Answer the same question again (not after a cancel, and not while a turn runs)", statuses: [202], data: regenerateChatMessageResultSchema },
  { method: "post", path: "/v1/chat/sessions/{id}/approvals/{approvalId}", tag: "Chat", summary: "Approve or deny a tool call the agent waits on; once only (409), not after it timed out (408)", body: decideChatApprovalBodySchema, data: decideChatApprovalResultSchema },

  // Agent sessions and configs
  { method: "get", path: "/v1/agent-sessions", tag: "Agent configs", summary: "The caller's agent sessions, newest first", query: listAgentSessionsQuerySchema, limit: { default: DEFAULT_LIMIT, max: MAX_LIMIT, note: `at most ${MAX_SESSIONS_WITH_CONTENT} with session_id, whose sessions carry their content` } },
  { method: "put", path: "/v1/agent-sessions", tag: "Agent configs", summary: "Store or replace one agent session file (201 when new)", body: putAgentSessionBodySchema, statuses: [200, 201] },
  { method: "get", path: "/v1/configs", tag: "Agent configs", summary: "The caller's synced agent configs, with content; a page holds at most 8 MiB of it", query: listConfigsQuerySchema, limit: { default: DEFAULT_CONFIG_PAGE, max: MAX_CONFIGS_PER_USER } },
  { method: "put", path: "/v1/configs", tag: "Agent configs", summary: "Store a new version of one config file (201 when new)", body: upsertConfigBodySchema, statuses: [200, 201] },
  { method: "get", path: "/v1/configs/deleted", tag: "Agent configs", summary: "Deleted configs that can still be restored", query: listQuerySchema, limit: { default: DEFAULT_CONFIG_PAGE, max: MAX_LIMIT } },
  { method: "post", path: "/v1/configs/sync", tag: "Agent configs", summary: "One action per file from the device's manifest", body: syncConfigsBodySchema },
  { method: "post", path: "/v1/configs/ack", tag: "Agent configs", summary: "The device reports the versions it now holds", body: ackConfigsBodySchema },
  { method: "post", path: "/v1/configs/merge", tag: "Agent configs", summary: "A line-level union of two versions", body: mergeConfigsBodySchema },
  { method: "post", path: "/v1/configs/restore", tag: "Agent configs", summary: "Bring a deleted config back as a new version", body: restoreConfigBodySchema },
  { method: "post", path: "/v1/configs/local-delete", tag: "Agent configs", summary: "Remove a config from one device only", body: localDeleteBodySchema },
  { method: "post", path: "/v1/configs/batch-delete", tag: "Agent configs", summary: "Delete configs everywhere", body: batchDeleteConfigsBodySchema },
  { method: "get", path: "/v1/configs/{id}", tag: "Agent configs", summary: "One config with its content" },
  { method: "delete", path: "/v1/configs/{id}", tag: "Agent configs", summary: "Delete everywhere (restorable for 30 days)" },
  { method: "get", path: "/v1/configs/{id}/versions", tag: "Agent configs", summary: "The stored versions of one config, newest first", query: listQuerySchema, limit: { default: MAX_VERSIONS_KEPT, max: MAX_LIMIT } },
];
