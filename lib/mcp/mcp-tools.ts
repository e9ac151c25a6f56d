import { z } from "zod";
import { ASK_DEFAULT_LIMIT } from "@/lib/ask/ask-fields.ts";
import { askQuestion } from "@/lib/ask/ask-question.ts";
import { NOTHING_FOUND } from "@/lib/ask/extractive-answer.ts";
import { countUsage } from "@/lib/usage/count-usage.ts";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { cursorSchema, DEFAULT_LIMIT, MAX_LIMIT } from "@/lib/api/pagination.ts";
import { normalizeId, uuidField } from "@/lib/ids.ts";
import { listHubs } from "@/lib/hubs/list-hubs.ts";
import { listMembers } from "@/lib/hubs/list-members.ts";
import { createMemory } from "@/lib/memories/create-memory.ts";
import { deleteMemory } from "@/lib/memories/delete-memory.ts";
import { findMemoryOrThrow } from "@/lib/memories/find-memory.ts";
import { getMemoryPage, pageCharsAtMost } from "@/lib/memories/get-memory.ts";
import { listMemories } from "@/lib/memories/list-memories.ts";
import {
  createMemoryBodySchema,
  INITIATION_TYPES,
  MAX_AGENT_NAME_CHARS,
  MAX_HINT_CHARS,
  MAX_HUB_REASON_CHARS,
  MAX_PROJECT_CONTEXT_KEY_CHARS,
  MAX_PROJECT_CONTEXT_KEYS,
  MAX_PROJECT_CONTEXT_VALUE_CHARS,
  MAX_SOURCE_LENGTH,
  MAX_SOURCE_PATH_LENGTH,
  MAX_TAGS,
  MAX_TAG_LENGTH,
  MAX_TITLE_LENGTH,
  projectContextSchema,
} from "@/lib/memories/memory-fields.ts";
import type { MemoryObject } from "@/lib/memories/serialize-memory.ts";
import { atxHeading, codeFences, openingFence } from "@/lib/processing/markdown-lines.ts";
import { SUMMARY_MAX_CHARS } from "@/lib/processing/summarize-content.ts";
import { formatAge } from "@/lib/recall/format-age.ts";
import { MAX_QUERY_CHARS, RECALL_MAX_LIMIT } from "@/lib/recall/recall-fields.ts";
import { recallMemories } from "@/lib/recall/recall-memories.ts";
import { listTopics } from "@/lib/topics/list-topics.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { MAX_CONTEXT_CHARS, MAX_OPTION_CHARS, MAX_QUESTION_CHARS, requestDecisionBodySchema } from "@/lib/boards/decision-gate-fields.ts";
import { requestDecision } from "@/lib/boards/request-decision.ts";
import { assertReachable, assertWriteScope, hubForWrite, hubIdFromRef, narrowedHubIds } from "./mcp-access.ts";

/** What a tool returns: markdown for the model, and the same facts as structured content. */
export interface ToolOutput {
  text: string;
  structured: Record<string, unknown>;
}

export interface ToolEnv {
  ctx: AuthContext;
  /** Public origin of this instance, for dashboard links. */
  origin: string;
  /** The name this endpoint serves an engram_* tool under (/mcp/chatgpt renames them): what a result's hints name. */
  toolName(name: string): string;
}

export interface ToolDef<S extends z.ZodObject = z.ZodObject> {
  name: string;
  /** The engram_* tool this one is, under another name (/mcp/chatgpt). */
  serves?: string;
  title: string;
  description: string;
  input: S;
  annotations: { readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: false };
  /**
   * For a read whose size a page of text sets: what its result can take in the response's JSON at most,
   * found before it runs (the request's result budget counts it at this until it answers; serve-mcp.ts).
   */
  resultBound?(env: ToolEnv, args: z.output<S>): Promise<number>;
  run(env: ToolEnv, args: z.output<S>): Promise<ToolOutput>;
}

const read = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;
const write = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false } as const;
const destroy = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false } as const;

const hubRef = z.string().max(200).describe('Hub id, hub slug, or "personal"');
/** Trimmed text must not be blank: stated in the listed schema too (a pattern), or "   " looks valid there. */
const NOT_BLANK = { pattern: "\\S" };
const memoryId = z.string().min(1).max(100).overwrite(normalizeId).describe("Memory id");
const EXCERPT_CHARS = 600;

function define<S extends z.ZodObject>(def: ToolDef<S>): ToolDef {
  return def as unknown as ToolDef;
}

export function memoryUrl(origin: string, id: string): string {
  return `${origin}/memories/${id}`;
}

function excerpt(text: string, max = EXCERPT_CHARS): string {
  // Each run of spaces through a line break becomes one break, as replace(/\s+\n/g, "\n") did; that
  // regex rescanned a run from each of its spaces, quadratic on a chunk with a long run of them.
  const flat = text
    .replace(/\s+/g, (run) => {
      const lastBreak = run.lastIndexOf("\n");
      return lastBreak === -1 ? run : `\n${run.slice(lastBreak + 1)}`;
    })
    .trim();
  if (flat.length <= max) return flat;
  // Never between the halves of a surrogate pair: a lone one is written "\ud83d" in the JSON, which strict parsers refuse.
  const cut = /[\ud800-\udbff]$/.test(flat.slice(0, max)) ? max - 1 : max;
  return `${flat.slice(0, cut).trimEnd()}…`;
}

function quote(text: string): string {
  return text
    .split("\n")
    .map((line) => `> ${line}`)
    .join("\n");
}

function memoryLine(m: MemoryObject, now: Date): string {
  return `- **${m.title}** — ${m.kind ?? "unclassified"}, ${formatAge(new Date(m.created_at), now)}, id \`${m.id}\`${m.summary ? `\n  ${excerpt(m.summary, 200)}` : ""}`;
}

/** A result count clamped, not refused, as POST /v1/recall and /v1/ask do: a model asking for 100 still gets the 50 best. */
function clampedLimit(description: string) {
  return z.coerce
    .number()
    .int()
    .min(1)
    .optional()
    .transform((n) => (n === undefined ? undefined : Math.min(n, RECALL_MAX_LIMIT)))
    .describe(description);
}

const recallInput = z.object({
  query: z.string().trim().min(1).max(MAX_QUERY_CHARS).meta(NOT_BLANK).describe("What to look for, in natural language"),
  limit: clampedLimit(`Most results to return (default 10; more than ${RECALL_MAX_LIMIT} gives ${RECALL_MAX_LIMIT})`),
  topic_id: uuidField().optional().describe("Only memories filed under this topic"),
  hub_id: hubRef.optional().describe('Rank this hub first: a hub id, slug, or "personal" (every reachable hub is searched)'),
  project_context: projectContextSchema.optional().describe("The current repo/project/branch, to rank matching memories higher"),
});

async function recall(env: ToolEnv, args: z.output<typeof recallInput>): Promise<ToolOutput> {
  const { ctx } = env;
  const preferred = await hubIdFromRef(ctx, args.hub_id, env.toolName("engram_hubs"));
  const narrowed = await narrowedHubIds(ctx);
  if (narrowed?.length === 0) {
    return { text: `No memories match "${args.query}" (this connection reaches no hubs).`, structured: { memories: [], query: args.query } };
  }
  const result = await recallMemories(ctx, {
    query: args.query,
    limit: args.limit,
    topic_id: args.topic_id,
    project_context: args.project_context,
    hub_ids: narrowed,
    preferred_hub_id: preferred,
    source: "mcp",
  });
  // Counted as POST /v1/recall counts it: /v1/usage and the onboarding's first-recall step read this counter.
  await countUsage(ctx, "recalls");
  const lines = result.memories.map(
    (m, i) =>
      `${i + 1}. **${m.title}** — ${m.kind}, score ${m.relevance_score.toFixed(2)}, ${m.age}${m.hub_name ? `, hub ${m.hub_name}` : ""}, id \`${m.id}\`\n${quote(excerpt(m.chunk_content || m.summary))}`,
  );
  const text = lines.length
    ? `${lines.length} memor${lines.length === 1 ? "y" : "ies"} for "${args.query}":\n\n${lines.join("\n\n")}\n\nUse ${env.toolName("engram_get")} with an id for the full content.`
    : `No memories match "${args.query}".`;
  return { text, structured: { query: args.query, memories: result.memories, query_metadata: result.query_metadata } };
}

const pushInput = z.object({
  // White space alone is as empty as "", as on REST's create: it would save a memory of nothing.
  content: z
    .string()
    .min(1)
    .refine((content) => content.trim().length > 0, "content must not be empty")
    .meta(NOT_BLANK)
    .describe("The knowledge to save (markdown welcome)"),
  title: z.string().trim().min(1).max(MAX_TITLE_LENGTH).meta(NOT_BLANK).optional().describe("Short title (derived from the content when omitted)"),
  hint: z.string().max(MAX_HINT_CHARS).optional().describe("What this is, to guide classification (e.g. 'meeting notes from the product review')"),
  tags: z.array(z.string().trim().min(1).max(MAX_TAG_LENGTH).meta(NOT_BLANK)).max(MAX_TAGS).optional(),
  hub_id: hubRef.optional().describe('Where to save it: a hub id, slug, or "personal" (default: your personal hub)'),
  hub_reason: z.string().max(MAX_HUB_REASON_CHARS).optional().describe("Why this belongs in that hub"),
  initiation_type: z.enum(INITIATION_TYPES).optional().describe("Who asked for this save (default agent_proactive)"),
  project_context: projectContextSchema.optional(),
  // REST's own field: without it a push over an OAuth token named no agent. A key issued for an agent still pushes as that agent.
  source_agent: createMemoryBodySchema.shape.source_agent.describe("Your agent's name (e.g. claude-code)"),
});

type PushArgs = Omit<z.output<typeof pushInput>, "initiation_type" | "source_agent"> & Partial<Pick<z.output<typeof pushInput>, "initiation_type" | "source_agent">>;

async function push(env: ToolEnv, args: PushArgs): Promise<ToolOutput> {
  const hubCtx = await hubForWrite(env.ctx, args.hub_id, "memories.write", env.toolName("engram_hubs"));
  const { memory, created, warnings } = await createMemory(hubCtx, {
    content: args.content,
    title: args.title,
    hint: args.hint,
    tags: args.tags ? [...new Set(args.tags)] : undefined,
    hub_reason: args.hub_reason,
    project_context: args.project_context,
    source: "mcp",
    initiation_type: args.initiation_type ?? "agent_proactive",
    source_agent: args.source_agent,
  });
  await countUsage(hubCtx, "pushes");
  const verb = created ? "Saved" : "Already saved (same content)";
  // What REST sends as X-Engram-Warning: input ignored rather than refused must not pass silently here either.
  const warned = warnings.map((w) => `\n\nWarning: ${w}`).join("");
  return {
    text: `${verb}: **${memory.title}** in hub ${hubCtx.hub.name}, id \`${memory.id}\`. It is classified and indexed in the background; recall finds it within seconds.${warned}`,
    structured: { memory, created, url: memoryUrl(env.origin, memory.id), warnings },
  };
}

/** The memory, if it lives in a hub this credential reaches (without its text: callers read that themselves if they need it). */
async function reachableMemory(ctx: AuthContext, id: string) {
  const found = await findMemoryOrThrow(ctx, id, { content: false });
  assertReachable(ctx, found.memory.hubId, "Memory");
  return found;
}

/**
 * Characters of a memory's text one engram_get (or fetch) returns. A result carries its text twice (the
 * text item and structuredContent, which MCP asks to agree), so a 3 MiB memory answered whole was over
 * 6 MiB, far past any model's context; the rest is read page by page with `offset`.
 */
export const MAX_READ_CHARS = 100_000;
/**
 * A page read's result in JSON at most: its text twice (content and structuredContent), each character
 * up to six when escaped (a control character is \u0001), `escapes` more where the text is JSON escaped
 * again (fetch's), and an allowance for the memory's other fields.
 */
async function pageResultBound(env: ToolEnv, args: { id: string; offset?: number }, escapes = 0): Promise<number> {
  const chars = await pageCharsAtMost(env.ctx, args.id, { offset: args.offset ?? 0, chars: MAX_READ_CHARS });
  return (12 + escapes) * chars + PAGE_FIELDS_CHARS;
}
/** A character of a field at its worst in JSON ("\u0001"), and once more where a text is JSON escaped again (fetch's). */
const ESCAPED = 6;
/**
 * The most a page read's result holds besides its text (and an engram_list result for each memory of its
 * page), from the fields' limits: each character at its worst escaped, the title and tags twice (the text, and structuredContent; fetch's text escapes them
 * once more), and a margin for the fields of a fixed size (ids, times, field names, an attachment's, the
 * processing error, which processing cuts at 1,000). At 100,000 it was too small: project_context alone
 * holds about 211,000 escaped, so three pages of ~40,000 control characters with full fields, bounded at
 * 580,000 each, ran together and answered about 730,000 each, past the request's budget.
 */
const PAGE_FIELDS_CHARS =
  ESCAPED *
    (MAX_PROJECT_CONTEXT_KEYS * (MAX_PROJECT_CONTEXT_KEY_CHARS + MAX_PROJECT_CONTEXT_VALUE_CHARS + 6) +
      MAX_HINT_CHARS +
      MAX_HUB_REASON_CHARS +
      MAX_SOURCE_PATH_LENGTH +
      SUMMARY_MAX_CHARS +
      2 * MAX_AGENT_NAME_CHARS +
      MAX_SOURCE_LENGTH) +
  (2 * ESCAPED + 1) * (MAX_TITLE_LENGTH + MAX_TAGS * (MAX_TAG_LENGTH + 3)) +
  20_000;

const readInput = z.object({
  id: memoryId,
  offset: z.coerce.number().int().min(0).optional().describe(`Where to start in the memory's text (Unicode characters; default 0): next_offset of the previous read, for text past its first ${MAX_READ_CHARS} characters`),
});

/** One page of a memory's text from args.offset: only that page is read from the database. */
async function readPage(ctx: AuthContext, args: z.output<typeof readInput>) {
  await reachableMemory(ctx, args.id);
  // Reading on from an offset is the same read of the memory: only its first page counts as an access.
  return getMemoryPage(ctx, args.id, { offset: args.offset ?? 0, chars: MAX_READ_CHARS }, { countAccess: !args.offset });
}

async function get(env: ToolEnv, args: z.output<typeof readInput>): Promise<ToolOutput> {
  const { memory, page } = await readPage(env.ctx, args);
  const tags = memory.tags.length ? `, tags ${memory.tags.join(", ")}` : "";
  const partial = page.offset > 0 || page.next !== null;
  const where = partial
    ? `\n\n[Characters ${page.offset}–${page.next ?? page.length} of ${page.length}.${page.next !== null ? ` For the rest, call ${env.toolName("engram_get")} with this id and offset ${page.next}.` : ""}]`
    : "";
  const text = `# ${memory.title}\n\n${memory.kind ?? "unclassified"}, ${memory.content_type}, ${formatAge(new Date(memory.created_at), env.ctx.now())}${tags}, id \`${memory.id}\`\n\n${memory.content}${where}`;
  return {
    text,
    structured: {
      memory,
      url: memoryUrl(env.origin, memory.id),
      content_offset: page.offset,
      content_length: page.length,
      has_more: page.next !== null,
      next_offset: page.next,
    },
  };
}

/** A page size clamped to MAX_LIMIT, not refused: decisions.md clamps a list's larger limit, as REST does. */
function pageSize(description: string) {
  return z.coerce
    .number()
    .int()
    .min(1)
    .optional()
    .transform((n) => (n === undefined ? undefined : Math.min(n, MAX_LIMIT)))
    .describe(description);
}

const listInput = z.object({
  limit: pageSize(`Page size (default 20; more than ${MAX_LIMIT} gives ${MAX_LIMIT})`),
  cursor: cursorSchema.optional().describe("next_cursor of the previous page"),
  sort: z.enum(["newest", "relevant"]).optional().describe("newest first (default) or most used first"),
  hub_id: hubRef.optional(),
  topic_id: uuidField().optional(),
});

async function list(env: ToolEnv, args: z.output<typeof listInput>): Promise<ToolOutput> {
  const { ctx } = env;
  // Without hub_id, every hub the credential reaches (listMemories applies its limits), as GET /v1/memories lists.
  const hubId = await hubIdFromRef(ctx, args.hub_id, env.toolName("engram_hubs"));
  if (hubId) assertReachable(ctx, hubId);
  const page = await listMemories(ctx, {
    limit: args.limit === undefined ? undefined : String(args.limit),
    cursor: args.cursor,
    sort: args.sort ?? "newest",
    hub_id: hubId,
    topic_id: args.topic_id,
  });
  const now = ctx.now();
  const body = page.memories.map((m) => memoryLine(m, now)).join("\n");
  // A cursor belongs to its list (sort, hub, topic): the next page needs the same arguments with it.
  const same = [args.hub_id !== undefined && `hub_id "${args.hub_id}"`, args.topic_id && `topic_id "${args.topic_id}"`, args.sort && `sort "${args.sort}"`].filter(Boolean);
  const more = page.has_more ? `\n\nMore: call again with cursor "${page.next_cursor}"${same.length ? ` and the same ${same.join(", ")}` : ""}.` : "";
  return { text: `${page.memories.length} of ${page.total} memories:\n\n${body || "(none)"}${more}`, structured: page };
}

async function forget(env: ToolEnv, args: { id: string }): Promise<ToolOutput> {
  assertWriteScope(env.ctx);
  const { memory } = await reachableMemory(env.ctx, args.id);
  const result = await deleteMemory(env.ctx, args.id);
  return { text: `Deleted **${memory.title}** (id \`${result.id}\`).`, structured: result };
}

async function hubs(env: ToolEnv): Promise<ToolOutput> {
  // listHubs is the resolver's view: a credential limited to some hubs lists only those.
  const entries = await listHubs(env.ctx);
  const text = entries
    .map((h) => `- **${h.hub.name}** (${h.hub.hub_type}) — slug \`${h.hub.slug}\`, id \`${h.hub.id}\`, your role ${h.role}, ${h.memory_count} memories, ${h.member_count} members`)
    .join("\n");
  return { text: entries.length ? `Your hubs:\n\n${text}` : "This connection reaches no hubs.", structured: { hubs: entries } };
}

const hubMembersInput = z.object({
  // Required: blank is no hub named, refused as such (taken as none, it was looked up and "not found").
  hub_id: z.string().trim().min(1, "hub_id must name a hub").max(200).meta(NOT_BLANK).describe('Hub id, hub slug, or "personal"'),
  limit: pageSize(`Page size (default ${MAX_LIMIT}; more than ${MAX_LIMIT} gives ${MAX_LIMIT})`),
  cursor: cursorSchema.optional().describe("next_cursor of the previous page"),
});

async function hubMembers(env: ToolEnv, args: z.output<typeof hubMembersInput>): Promise<ToolOutput> {
  const hubId = (await hubIdFromRef(env.ctx, args.hub_id, env.toolName("engram_hubs")))!;
  assertReachable(env.ctx, hubId);
  // Pages like engram_list: a hub past one page had members the model could never reach.
  const page = await listMembers(env.ctx, hubId, { limit: String(args.limit ?? MAX_LIMIT), cursor: args.cursor });
  const text = page.members.map((m) => `- ${m.name} (${m.role})`).join("\n");
  const more = page.has_more ? `\n\nMore: call again with cursor "${page.next_cursor}".` : "";
  return { text: `Members:\n\n${text || "(none)"}${more}`, structured: page };
}

type TopicNode = Awaited<ReturnType<typeof listTopics>>["topics"][number];

/** Hubs whose trees engram_topics lists at once without hub_id: each tree may hold 500 topics. */
const MAX_TOPIC_TREES = 10;

async function topics(env: ToolEnv, args: { hub_id?: string; topic_id?: string }): Promise<ToolOutput> {
  const { ctx } = env;
  const hubId = await hubIdFromRef(ctx, args.hub_id, env.toolName("engram_hubs"));
  let hubIds: string[];
  if (hubId) hubIds = [hubId];
  else {
    const readable = (await readableHubs(ctx)).map((m) => m.hub.id);
    if (args.topic_id) {
      // Only the topic's own tree is needed; one in a hub out of reach is simply not found.
      const row = await ctx.db.topic.findFirst({ where: { id: args.topic_id, hubId: { in: readable }, archivedAt: null, deletingAt: null }, select: { hubId: true } });
      if (!row) throw new ApiError("not_found", "Topic not found");
      hubIds = [row.hubId];
    } else if (readable.length > MAX_TOPIC_TREES) {
      // Every tree of up to 100 hubs (500 topics each) would be one answer too large to load or read.
      throw new ApiError("invalid_request", `This connection reaches ${readable.length} hubs: pass hub_id for one hub's topics (see ${env.toolName("engram_hubs")})`, { max_hubs: MAX_TOPIC_TREES });
    } else hubIds = readable;
  }
  // One tree after another: at once they would take as many pooled connections.
  const trees: ({ hub_id: string } & Awaited<ReturnType<typeof listTopics>>)[] = [];
  for (const id of hubIds) trees.push({ hub_id: id, ...(await listTopics(ctx, id)) });
  const flat: { topic: TopicNode; depth: number }[] = [];
  const walk = (nodes: TopicNode[], depth: number) => {
    for (const node of nodes) {
      flat.push({ topic: node, depth });
      walk(node.children, depth + 1);
    }
  };
  for (const tree of trees) walk(tree.topics, 0);
  if (args.topic_id) {
    const topic = flat.find((f) => f.topic.id === args.topic_id)?.topic;
    if (!topic) throw new ApiError("not_found", "Topic not found");
    const page = await listMemories(ctx, { sort: "newest", hub_id: topic.hub_id, topic_id: topic.id, limit: "50" });
    const now = ctx.now();
    const body = page.memories.map((m) => memoryLine(m, now)).join("\n");
    // The first page only; its cursor is engram_list's for the same hub, topic and sort, so the rest stays reachable.
    const more = page.has_more
      ? `\n\nMore: call ${env.toolName("engram_list")} with topic_id "${topic.id}", hub_id "${topic.hub_id}", sort "newest" and cursor "${page.next_cursor}".`
      : "";
    return {
      text: `Topic **${topic.name}** (${page.total} memories):\n\n${body || "(none)"}${more}`,
      structured: { topic, memories: page.memories, total: page.total, next_cursor: page.next_cursor, has_more: page.has_more },
    };
  }
  const text = flat.map(({ topic, depth }) => `${"  ".repeat(depth)}- **${topic.name}** — id \`${topic.id}\`, hub \`${topic.hub_id}\`, ${topic.total_memory_count} memories`).join("\n");
  return { text: flat.length ? `Topics:\n\n${text}` : "No topics yet.", structured: { hubs: trees } };
}

const askInput = z.object({
  query: z.string().trim().min(1).max(MAX_QUERY_CHARS).meta(NOT_BLANK).describe("The question, in natural language"),
  limit: clampedLimit(`Sources to answer from (default ${ASK_DEFAULT_LIMIT}; more than ${RECALL_MAX_LIMIT} gives ${RECALL_MAX_LIMIT})`),
  topic_id: uuidField().optional().describe("Only memories filed under this topic"),
  hub_id: hubRef.optional().describe('Rank this hub first: a hub id, slug, or "personal" (every reachable hub is searched)'),
});

/** POST /v1/ask's domain function: recall, then an answer that cites its sources as [n]. */
async function ask(env: ToolEnv, args: z.output<typeof askInput>): Promise<ToolOutput> {
  const { ctx } = env;
  const preferred = await hubIdFromRef(ctx, args.hub_id, env.toolName("engram_hubs"));
  const narrowed = await narrowedHubIds(ctx);
  if (narrowed?.length === 0) {
    return { text: `${NOTHING_FOUND} (this connection reaches no hubs)`, structured: { answer: NOTHING_FOUND, citations: [], sources: [] } };
  }
  const result = await askQuestion(ctx, { query: args.query, limit: args.limit, topic_id: args.topic_id, preferred_hub_id: preferred, hub_ids: narrowed });
  await countUsage(ctx, "asks");
  const cited = new Set(result.citations.map((c) => c.index));
  const sources = result.sources
    .map((m, i) => ({ m, n: i + 1 }))
    .filter(({ n }) => cited.has(n))
    .map(({ m, n }) => `[${n}] **${m.title}** — ${m.kind}, ${m.age}${m.hub_name ? `, hub ${m.hub_name}` : ""}, id \`${m.id}\``);
  const text = sources.length ? `${result.answer}\n\nSources:\n${sources.join("\n")}\n\nUse ${env.toolName("engram_get")} with an id for the full content.` : result.answer;
  return { text, structured: { ...result } };
}

const captureInput = z.object({
  summary: z.string().trim().min(1).max(20_000).meta(NOT_BLANK).describe("What was accomplished in this session"),
  decisions: z.array(z.string().trim().min(1).max(2000).meta(NOT_BLANK)).max(100).optional().describe("Decisions made, one per item"),
  learnings: z.array(z.string().trim().min(1).max(2000).meta(NOT_BLANK)).max(100).optional().describe("Things learned, one per item"),
  hub_id: hubRef.optional(),
  // As on engram_push: without it a capture over an OAuth token named no agent. A key issued for an agent still captures as that agent.
  source_agent: pushInput.shape.source_agent,
});

const SETEXT_UNDERLINE = /^\s*(?:=+|-+)\s*$/;
/** A heading with no text ("##"), which atxHeading (a title's reader) does not take for one; markdown does. */
const EMPTY_HEADING = /^#{1,6}\s*$/;
/**
 * The HTML blocks that end only at their own closer, not at a blank line (CommonMark's kinds 1 to 5): one
 * left open ran through every section after it, which the dashboard (dropping HTML) then did not show.
 */
const UNCLOSED_HTML_BLOCK = /^(?:<(?:script|pre|style|textarea)(?:\s|>|$)|<!--|<\?|<![A-Za-z]|<!\[CDATA\[)/i;
/** Block quote and list markers a line's text may sit behind ("> ", "- ", "1. "), nested or not. */
const CONTAINER_MARKERS = /^(?:\s*(?:>|[-+*](?=\s)|\d{1,9}[.)](?=\s)))+\s*/;
/** A line opening a list item ("- ", "1. ", an empty "-"), behind quotes or not. */
const LIST_ITEM = /^(?:\s*>)*\s*(?:[-+*]|\d{1,9}[.)])(?:\s|$)/;
/** A fence indented one to three spaces: where a list item is open, those spaces may put it inside the item. */
const INDENTED_FENCE = /^ {1,3}(?:`{3,}|~{3,})/;

/**
 * A field's lines as text of its section: a line markdown reads as a heading (`# …`, or an underline
 * of `=`/`-`) is escaped, and a code fence left open is closed. Written as they came, a decision
 * holding "\n## Learnings" forged a section of its own, and a summary's unclosed fence made every
 * section after it code. Line ends are made "\n" first: a renderer ends a line at "\r" too, so
 * "Done.\r## Learnings" was a heading. A heading behind a quote or list marker ("- ## Learnings") is
 * one too, inside that item, and so is escaped, as is one indented any depth (a list item's content
 * may be): in indented code that shows a backslash, the price of never forging a section. So is the
 * `<` of an HTML block that only its own closer ends (`<!--`, `<pre>`).
 */
function sectionText(text: string): string[] {
  const fence = codeFences();
  let open: string | undefined;
  let listSeen = false;
  // The closer is as long as the longest fence of its character in the field: whatever run a renderer took to open it, this closes it.
  let longest = { "`": 0, "~": 0 };
  const lines = text.split(/\r\n?|\n/).map((field) => {
    // After a list item, a fence indented one to three spaces may be the item's, which a line at the margin
    // ends (and its fence with it): read as the field's own, the lines after it were left unescaped and the
    // closer appended opened a real fence over the sections after. Escaped, it is no fence anywhere.
    const line = open === undefined && listSeen && INDENTED_FENCE.test(field) && openingFence(field) ? field.replace(/^( {1,3})/, "$1\\") : field;
    const kind = fence(line);
    if (kind === "text" && LIST_ITEM.test(line)) listSeen = true;
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker) longest = { ...longest, [marker[0]!]: Math.max(longest[marker[0] as "`" | "~"], marker.length) };
    if (kind === "fence") open = open === undefined ? openingFence(line) : undefined;
    if (kind !== "text") return line;
    const prefix = CONTAINER_MARKERS.exec(line)?.[0] ?? /^\s*/.exec(line)![0];
    const rest = line.slice(prefix.length);
    if (!(atxHeading(rest) || SETEXT_UNDERLINE.test(rest) || SETEXT_UNDERLINE.test(line) || EMPTY_HEADING.test(rest) || UNCLOSED_HTML_BLOCK.test(rest))) return line;
    return SETEXT_UNDERLINE.test(line) && !atxHeading(rest) && !EMPTY_HEADING.test(rest) ? line.replace(/^(\s*)/, "$1\\") : `${prefix}\\${rest}`;
  });
  return open === undefined ? lines : [...lines, open[0]!.repeat(Math.max(open.length, longest[open[0] as "`" | "~"]))];
}

async function capture(env: ToolEnv, args: z.output<typeof captureInput>): Promise<ToolOutput> {
  // An item's further lines are indented into its list item: at the margin they began paragraphs (or items) of their own.
  // Its text starts at column 4, a tab stop: indented by two, a line's tab ("\t```") reached the next stop two columns
  // early, and what was code in the field (a tab is four columns of indent) became a fence closing the item's code.
  // Its first line with no indent of its own: "-   " and two or three spaces before a fence made indented code, which
  // sectionText (reading the field from the margin) took for an open fence, leaving the lines after it unescaped. The
  // schema trims each item today; this keeps item() right without leaning on that.
  const item = (text: string) => `-   ${sectionText(text.replace(/^[ \t]+/, "")).map((line, i) => (i === 0 || !line ? line : `    ${line}`)).join("\n")}`;
  const section = (heading: string, items?: string[]) => (items?.length ? `\n\n## ${heading}\n\n${items.map(item).join("\n")}` : "");
  const content = `## Summary\n\n${sectionText(args.summary).join("\n")}${section("Decisions", args.decisions)}${section("Learnings", args.learnings)}`;
  // At most 150 UTF-16 units (the title stays within MAX_TITLE_LENGTH), cut between characters: a cut
  // through an emoji left half of it, stored as U+FFFD.
  let firstLine = "";
  for (const char of args.summary.split(/\r\n?|\n/)[0]!) {
    if (firstLine.length + char.length > 150) break;
    firstLine += char;
  }
  return push(env, { content, title: `Session: ${firstLine}`, tags: ["session-capture"], hub_id: args.hub_id, hint: "An agent's end-of-session capture", source_agent: args.source_agent });
}

// POST /v1/hubs/{id}/board/decision-gate's body (requestDecisionBodySchema), its rules stated where tools/list shows them.
const requestDecisionInput = z.object({
  question: z.string().trim().min(1, "question must not be empty").max(MAX_QUESTION_CHARS).meta(NOT_BLANK).describe("The decision to make, one user-facing sentence"),
  options: z
    .array(z.string().trim().min(1, "an option must not be empty").max(MAX_OPTION_CHARS).meta(NOT_BLANK))
    .min(2, "give 2 to 4 options")
    .max(4, "give 2 to 4 options")
    .refine((list) => new Set(list.map((o) => o.toLowerCase())).size === list.length, "options must differ")
    // What JSON Schema can say of "must differ"; the tool also compares them ignoring case, as REST does.
    .meta({ uniqueItems: true })
    .describe("2 to 4 mutually exclusive choices: short labels that differ (ignoring case)"),
  context: z.string().trim().max(MAX_CONTEXT_CHARS).optional().describe("Why it matters: tradeoffs, constraints, your recommendation if any"),
  hub_id: hubRef.optional().describe('Whose board asks: a hub id, slug, or "personal" (default: your personal hub)'),
  // REST's own field: without it a card asked over an OAuth token named no agent. A key issued for an agent still asks as that agent.
  source_agent: requestDecisionBodySchema.shape.source_agent.describe("Your agent's name (e.g. claude-code), shown on the card"),
});

/** POST /v1/hubs/{id}/board/decision-gate's domain function: a card on the hub's board and a pending decision in the bell. */
async function askForDecision(env: ToolEnv, args: z.output<typeof requestDecisionInput>): Promise<ToolOutput> {
  const hubCtx = await hubForWrite(env.ctx, args.hub_id, "memories.write", env.toolName("engram_hubs"));
  const { slot } = await requestDecision(env.ctx, hubCtx.hub.id, { question: args.question, options: args.options, context: args.context, source_agent: args.source_agent });
  return {
    text:
      `Decision card created on the board of hub ${hubCtx.hub.name} (id \`${slot.slot_key}\`). The user has been notified; their choice is saved as a memory. ` +
      `Recall with keywords from your question later to read it, and continue with other work now.`,
    structured: { slot, hub_id: hubCtx.hub.id },
  };
}

/** The standard tool set of /mcp. */
export const ENGRAM_TOOLS: ToolDef[] = [
  define({
    name: "engram_recall",
    title: "Recall memories",
    description:
      "Search the memories of every hub this connection reaches with a natural-language query; returns the best excerpts ranked by relevance. Use it before answering questions about the project, the team's decisions or past work.",
    input: recallInput,
    annotations: read,
    run: recall,
  }),
  define({
    name: "engram_push",
    title: "Save a memory",
    description: "Save a piece of knowledge (a decision, a how-to, notes, code) to Engram. It is classified, chunked and indexed automatically.",
    input: pushInput,
    annotations: write,
    run: (env, args) => push(env, args),
  }),
  define({
    name: "engram_get",
    title: "Read a memory",
    description: `The full content of one memory by id, ${MAX_READ_CHARS} characters at a time (offset reads further).`,
    input: readInput,
    annotations: read,
    resultBound: (env, args) => pageResultBound(env, args),
    run: get,
  }),
  define({
    name: "engram_list",
    title: "List memories",
    description: "Browse memories, newest (or most used) first, one page at a time.",
    input: listInput,
    annotations: read,
    // Each memory of the page at its fields' limits: counted at the largest result so far, lists of memories with full
    // project_context (about 211,000 characters each, escaped) ran together after a small read, past the budget.
    resultBound: async (_env, args) => (args.limit ?? DEFAULT_LIMIT) * PAGE_FIELDS_CHARS,
    run: list,
  }),
  define({ name: "engram_forget", title: "Delete a memory", description: "Permanently delete one memory by id.", input: z.object({ id: memoryId }), annotations: destroy, run: forget }),
  define({ name: "engram_hubs", title: "List hubs", description: "The hubs this connection reaches, with slugs, ids and your role.", input: z.object({}), annotations: read, run: hubs }),
  define({
    name: "engram_hub_members",
    title: "List hub members",
    description: "The members of one hub and their roles, one page at a time.",
    input: hubMembersInput,
    annotations: read,
    run: hubMembers,
  }),
  define({
    name: "engram_topics",
    title: "List topics",
    description: `The topics memories are filed under, optionally for one hub or one topic (past ${MAX_TOPIC_TREES} hubs, pass hub_id).`,
    input: z.object({ topic_id: uuidField().optional(), hub_id: hubRef.optional() }),
    annotations: read,
    run: topics,
  }),
  define({
    name: "engram_ask",
    title: "Ask a question",
    description:
      "Answer a question from the memories of every hub this connection reaches: the answer is written only from the best matching memories and cites them as [n]; it says so when nothing relevant was found.",
    input: askInput,
    annotations: read,
    run: ask,
  }),
  define({
    name: "engram_capture",
    title: "Capture this session",
    description: "At the end of a significant work session, save its summary, decisions and learnings as one memory.",
    input: captureInput,
    annotations: write,
    run: capture,
  }),
  define({
    name: "engram_request_decision",
    title: "Ask the user to decide",
    description:
      "Ask the user to make a decision you should not make alone (architecture choices, irreversible actions, tradeoffs with no clear winner). " +
      "Creates a decision card on the hub's board and notifies them; their choice is saved as a memory, so recall it later with keywords from the question. Do not wait for it.",
    input: requestDecisionInput,
    annotations: write,
    run: askForDecision,
  }),
];

const CHATGPT_NAMES: Record<string, string> = {
  engram_push: "save_memory",
  engram_list: "list_memories",
  engram_forget: "delete_memory",
  engram_hubs: "list_hubs",
  engram_hub_members: "list_hub_members",
  engram_topics: "list_topics",
  engram_capture: "capture_session",
  engram_ask: "ask",
};

/** ChatGPT connectors and deep research: search + fetch with their fixed shapes, then the rest under plain names. */
export const CHATGPT_TOOLS: ToolDef[] = [
  define({
    name: "search",
    serves: "engram_recall",
    title: "Search memories",
    description: "Search Engram memories. Returns ids, titles and links; use fetch for the full text.",
    input: z.object({ query: z.string().trim().min(1).max(MAX_QUERY_CHARS).meta(NOT_BLANK) }),
    annotations: read,
    run: async (env, args) => {
      const found = await recall(env, { query: args.query, limit: 10 });
      const memories = (found.structured.memories as { id: string; title: string }[]).map((m) => ({ id: m.id, title: m.title, url: memoryUrl(env.origin, m.id) }));
      // ChatGPT reads exactly one text item holding this JSON.
      return { text: JSON.stringify({ results: memories }), structured: { results: memories } };
    },
  }),
  define({
    name: "fetch",
    serves: "engram_get",
    title: "Fetch a memory",
    description: `The full text of one memory found by search, ${MAX_READ_CHARS} characters at a time (metadata.next_offset, when set, is the offset to fetch the rest from).`,
    input: readInput,
    annotations: read,
    // Its text is the document as JSON, escaped once more in the response: a control character takes 7 there.
    resultBound: (env, args) => pageResultBound(env, args, 1),
    run: async (env, args) => {
      const { memory: m, page } = await readPage(env.ctx, args);
      const doc = {
        id: m.id,
        title: m.title,
        text: m.content,
        url: memoryUrl(env.origin, m.id),
        metadata: {
          kind: m.kind,
          hub_id: m.hub_id,
          tags: m.tags,
          content_type: m.content_type,
          created_at: m.created_at,
          content_offset: page.offset,
          content_length: page.length,
          next_offset: page.next,
        },
      };
      return { text: JSON.stringify(doc), structured: doc };
    },
  }),
  ...ENGRAM_TOOLS.filter((t) => CHATGPT_NAMES[t.name]).map((t) => ({ ...t, name: CHATGPT_NAMES[t.name]!, serves: t.name })),
];

/** ToolEnv.toolName for an endpoint serving `tools`. */
export function toolNamer(tools: ToolDef[]): (name: string) => string {
  const names = new Map(tools.map((t) => [t.serves ?? t.name, t.name]));
  return (name) => names.get(name) ?? name;
}

/**
 * memax_* names map onto engram_* ones (agents configured for the contract's original product), on an
 * endpoint serving that engram_* tool only: rewritten on /mcp/chatgpt, which serves none, memax_push was
 * answered "tool engram_push not found", a name the client never sent.
 */
export function toolAlias(name: string, tools: ToolDef[]): string | undefined {
  if (!name.startsWith("memax_")) return undefined;
  const alias = `engram_${name.slice("memax_".length)}`;
  return tools.some((t) => t.name === alias) ? alias : undefined;
}
