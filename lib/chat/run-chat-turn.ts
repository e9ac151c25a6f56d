import { randomUUID } from "node:crypto";
import type { AuthContext, Credential, HubContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { chatModel } from "@/lib/ai/chat-model.ts";
import { extractSentences } from "@/lib/ask/extractive-answer.ts";
import { buildPrompt, modelFallbackReason, ModelTimeoutError, modelTimeoutApiError, parseCitations, streamModelAnswer } from "@/lib/ask/model-answer.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { Database } from "@/lib/db/database.ts";
import type { ChatApproval, ChatMessage, ChatSession, Prisma } from "@/lib/db/generated/client.ts";
import { credentialWrites, hubPermissionOrThrow, memoryAccessWhere, readableHubs } from "@/lib/hubs/hub-access.ts";
import { isUuid, newId } from "@/lib/ids.ts";
import { createMemory } from "@/lib/memories/create-memory.ts";
import { isPersonaConfig } from "@/lib/personas/persona-source.ts";
import { estimateTokens } from "@/lib/processing/estimate-tokens.ts";
import type { RecalledMemory } from "@/lib/recall/load-recalled.ts";
import { recallMemories } from "@/lib/recall/recall-memories.ts";
import { turnScope } from "./chat-access.ts";
import { appendChatEvent, notifyChatEvent, onChatEvent } from "./chat-events.ts";
import { CHAT_LIMITS, chatSessionLockKey } from "./chat-fields.ts";
import { serializeChatMessage } from "./serialize-chat.ts";

/** A worker that has not written for this long has stopped; its turn may be taken over. */
export const CHAT_TURN_STALE_MS = 60_000;
/** Memories a turn's recall brings back. */
const RECALL_LIMIT = 8;
/** Characters of a pinned memory used as a source. */
const PINNED_CHARS = 4_000;
/** Characters of each source kept on the tool call while the turn runs (what a resumed turn answers from). */
const SOURCE_CHARS = 1_500;
/** Earlier turns shown to a chat model. */
const HISTORY_TURNS = 6;
/** A chat model's text is stored and streamed in pieces of about this many characters or milliseconds. */
const FLUSH_CHARS = 200;
const FLUSH_MS = 250;
/** While a chat model writes, how often its turn is checked for a cancel made in another process. */
const CANCEL_POLL_MS = 1_000;

export const NOTHING_IN_SCOPE = "I could not find anything in this chat's hubs that answers this.";

export interface ChatToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  status: "done" | "awaiting_approval" | "denied" | "timed_out" | "failed";
  approval_id?: string;
  result?: Record<string, unknown>;
}

class LostLease extends Error {}
class Canceled extends Error {}

/**
 * "Remember that …", "save this: …", "note: …", "记住…": the text to save, or null. A fixed rule so
 * the local agent is predictable; a chat model session uses the same rule (the tool is one call).
 */
export function saveRequest(content: string): string | null {
  const text = content.trim();
  const english = /^(?:please\s+)?(?:remember|save|note(?:\s+down)?|memorize|store|keep\s+in\s+mind)(?:\s+(?:that|this))?\s*[:,\-–—]?\s+([\s\S]+)$/i.exec(text);
  const chinese = /^(?:请)?(?:记住|记下|保存)[:：，,\s]*([\s\S]+)$/.exec(text);
  const found = (english ?? chinese)?.[1]?.trim();
  return found ? found : null;
}

/** The limits of the credential that sent the turn (or approved its tool), as stored with it. */
export function credentialSnapshot(credential: Credential): Prisma.InputJsonValue {
  return { type: credential.type, scopes: [...credential.scopes], hub_ids: credential.hubIds ? [...credential.hubIds] : null, ...(credential.agentName && { agent_name: credential.agentName }) };
}

function credentialFrom(json: unknown): Credential {
  const value = (json ?? {}) as { type?: Credential["type"]; scopes?: string[]; hub_ids?: string[] | null; agent_name?: string };
  return {
    type: value.type ?? "api_key",
    scopes: (value.scopes ?? ["read"]).filter((s): s is "read" | "write" => s === "read" || s === "write"),
    hubIds: value.hub_ids === undefined ? [] : value.hub_ids,
    ...(value.agent_name && { agentName: value.agent_name }),
  };
}

interface Turn {
  database: Database;
  owner: string;
  message: ChatMessage;
  session: ChatSession;
  ctx: AuthContext;
  toolCalls: ChatToolCall[];
  content: string;
}

/**
 * Runs (or resumes) one assistant turn to its end or to a pause for an approval. Any number of
 * workers may be handed the same turn: the lease lets one at a time work on it, and a turn whose
 * worker died is taken over after CHAT_TURN_STALE_MS. A turn re-entered after its answer began
 * is not answered twice: it ends partial_failed with what was written.
 */
export async function runChatTurn(database: Database, messageId: string, owner = `worker-${randomUUID()}`): Promise<"finished" | "paused" | "skipped"> {
  const db = database.prisma;
  const now = new Date();
  const claimed = await db.chatMessage.updateMany({
    where: {
      id: messageId,
      role: "assistant",
      status: { in: ["queued", "running", "canceling"] },
      OR: [{ leaseOwner: null }, { heartbeatAt: { lt: new Date(now.getTime() - CHAT_TURN_STALE_MS) } }],
    },
    data: { leaseOwner: owner, heartbeatAt: now },
  });
  if (claimed.count === 0) return "skipped";
  // The lease lives while this worker does: a slow model or tool between writes must not look dead
  // to the sweep (which hands a turn over once its heartbeat is CHAT_TURN_STALE_MS old).
  const heartbeat = setInterval(() => {
    void db.chatMessage.updateMany({ where: { id: messageId, leaseOwner: owner }, data: { heartbeatAt: new Date() } }).catch(() => undefined);
  }, CHAT_TURN_STALE_MS / 4);
  heartbeat.unref();
  try {
    return await runLeasedTurn(database, messageId, owner);
  } finally {
    clearInterval(heartbeat);
  }
}

async function runLeasedTurn(database: Database, messageId: string, owner: string): Promise<"finished" | "paused" | "skipped"> {
  const db = database.prisma;
  const message = await db.chatMessage.findUniqueOrThrow({ where: { id: messageId } });
  const session = await db.chatSession.findUniqueOrThrow({ where: { id: message.sessionId } });
  const user = await db.user.findUnique({ where: { id: session.ownerId }, select: { id: true, email: true, name: true } });
  const ctx: AuthContext = {
    db,
    sql: database.sql,
    dbKind: database.kind,
    requestId: `chat-${message.id}`,
    now: () => new Date(),
    user: { id: session.ownerId, email: user?.email ?? "", name: user?.name ?? "" },
    credential: credentialFrom(message.credential),
  };
  const turn: Turn = { database, owner, message, session, ctx, toolCalls: (message.toolCalls as ChatToolCall[] | null) ?? [], content: message.content };
  try {
    if (!user || session.deletedAt || message.status === "canceling") throw new Canceled();
    const pending = await db.chatApproval.findFirst({ where: { messageId, status: "pending" } });
    if (pending && pending.expiresAt > new Date()) {
      await release(turn);
      return "paused";
    }
    if (pending) await expireApproval(db, pending);
    if ((await db.chatEvent.count({ where: { messageId, type: "message.text" } })) > 0) {
      await finish(turn, "partial_failed", { error: { code: "interrupted", message: "The turn stopped while it was answering; regenerate to answer again" } });
      return "finished";
    }
    if (message.status === "queued") {
      // Only from queued, and only while the lease is ours: a cancel that landed since the message was
      // read (canceling) must win, not be overwritten by running (and then by completed).
      const startedAt = new Date();
      const started = await db.chatMessage.updateMany({ where: { id: messageId, status: "queued", leaseOwner: owner }, data: { status: "running", startedAt } });
      if (started.count === 0) {
        const current = await db.chatMessage.findUnique({ where: { id: messageId }, select: { status: true, leaseOwner: true } });
        if (current?.leaseOwner !== owner) throw new LostLease();
        if (current.status === "canceling") throw new Canceled();
      } else turn.message = { ...turn.message, status: "running", startedAt };
    }
    const paused = await execute(turn);
    if (paused) return "paused";
    return "finished";
  } catch (error) {
    if (error instanceof LostLease) return "skipped";
    if (error instanceof Canceled) {
      await finish(turn, "canceled", {}).catch((e: unknown) => {
        if (!(e instanceof LostLease)) throw e;
      });
      return "finished";
    }
    console.error(`[engram] chat: turn ${messageId} failed`, error);
    // A model out of time midway is said as ask's stream says it; anything else is ours, and generic.
    const failure = error instanceof ModelTimeoutError ? modelTimeoutApiError(error) : { code: "internal", message: "The turn failed on the server" };
    await finish(turn, turn.content ? "partial_failed" : "failed", { error: { code: failure.code, message: failure.message } }).catch((e: unknown) => {
      if (!(e instanceof LostLease)) console.error(`[engram] chat: turn ${messageId} could not be finalised`, e);
    });
    return "finished";
  }
}

/** The turn's steps; true when it paused for an approval. */
async function execute(turn: Turn): Promise<boolean> {
  const { ctx, session, message, database } = turn;
  const db = database.prisma;
  const question = await userMessageOf(turn);
  const scope = await turnScope(ctx, session);
  await db.chatMessage.update({ where: { id: message.id }, data: { scopeHubIdsUsed: scope } });

  // A save already asked for goes on even if the tool was turned off meanwhile: its approval stands.
  const saving = session.tools.includes("push_memory") || turn.toolCalls.some((c) => c.name === "push_memory");
  const toSave = saving ? saveRequest(question.content) : null;
  if (toSave !== null) {
    const outcome = await pushMemoryStep(turn, toSave, scope);
    if (outcome === "paused") return true;
    await writeText(turn, [outcome]);
    await finish(turn, "completed", { usage: { model: "local", output_tokens: estimateTokens(turn.content) } });
    return false;
  }

  const started = performance.now();
  const sources = [...(await pinnedSources(turn, scope)), ...(await recallStep(turn, await recallQuery(turn, question), scope))];
  const unique = sources.filter((s, i) => sources.findIndex((o) => o.id === s.id) === i);
  const retrievalMs = Math.round(performance.now() - started);
  const model = session.model !== "local" && unique.length > 0 ? chatModel() : null;
  let fallbackReason: string | undefined;
  if (model) {
    try {
      const cited = await modelAnswer(turn, question, unique, scope, model);
      await finish(turn, "completed", {
        citations: cited.map((n) => citation(n, unique[n - 1]!)),
        usage: { model: session.model, output_tokens: estimateTokens(turn.content), retrieval_ms: retrievalMs },
      });
      return false;
    } catch (error) {
      // As ask does: once text went out the answer cannot be swapped (the turn ends partial_failed);
      // before that, the extractive answer stands in and says why.
      if (turn.content || error instanceof Canceled || error instanceof LostLease) throw error;
      console.error(`[engram] chat: the chat model failed on message ${turn.message.id}; answering extractively: ${error instanceof Error ? error.message : String(error)}`);
      // As in ask: a timeout in its own words, the provider's text only in the log, under the message id.
      fallbackReason = modelFallbackReason(error, `message ${turn.message.id}`);
    }
  }
  const sentences = unique.length ? await extractSentences(question.content, unique, turn.ctx.user.id) : [];
  const pieces = sentences.length === 0 ? [NOTHING_IN_SCOPE] : sentences.map((s, i) => `${i ? " " : ""}${s.text} [${s.source + 1}]`);
  await writeText(turn, pieces);
  const cited = [...new Set(sentences.map((s) => s.source + 1))];
  await finish(turn, "completed", {
    citations: cited.map((n) => citation(n, unique[n - 1]!)),
    usage: { model: "local", output_tokens: estimateTokens(turn.content), retrieval_ms: retrievalMs, ...(fallbackReason && { fallback_reason: fallbackReason }) },
  });
  return false;
}

function citation(index: number, source: RecalledMemory) {
  return { index, memory_id: source.id, title: source.title, ...(source.hub_id && { hub_id: source.hub_id }) };
}

/** The user message a turn answers: its parent, or (a regenerated answer) its parent's. */
async function userMessageOf(turn: Turn): Promise<ChatMessage> {
  const db = turn.database.prisma;
  let parentId = turn.message.parentMessageId;
  for (let hops = 0; parentId && hops < CHAT_LIMITS.messagesPerSession; hops++) {
    const parent = await db.chatMessage.findUnique({ where: { id: parentId } });
    if (!parent) break;
    if (parent.role === "user") return parent;
    parentId = parent.parentMessageId;
  }
  throw new Error("chat turn has no user message");
}

/**
 * What recall searches for: the message, and for a short follow-up ("and the deadline?") the
 * previous question too, so it keeps its subject.
 */
async function recallQuery(turn: Turn, question: ChatMessage): Promise<string> {
  if (question.content.split(/\s+/).length > 6) return question.content;
  const previous = await turn.database.prisma.chatMessage.findFirst({
    where: { sessionId: question.sessionId, role: "user", sequence: { lt: question.sequence } },
    orderBy: { sequence: "desc" },
    select: { content: true },
  });
  return previous ? `${previous.content.slice(0, 500)} ${question.content}` : question.content;
}

async function pinnedSources(turn: Turn, scope: string[]): Promise<RecalledMemory[]> {
  if (turn.session.pinnedMemoryIds.length === 0 || scope.length === 0) return [];
  const rows = await turn.ctx.db.memory.findMany({
    where: { AND: [memoryAccessWhere(turn.ctx), { id: { in: turn.session.pinnedMemoryIds } }, { hubId: { in: scope } }] },
    select: { id: true, title: true, summary: true, content: true, kind: true, stability: true, source: true, createdAt: true, hubId: true },
  });
  return rows.map((m) => ({
    id: m.id,
    title: m.title,
    summary: m.summary ?? "",
    chunk_content: m.content.slice(0, PINNED_CHARS),
    heading_chain: "",
    relevance_score: 1,
    kind: m.kind,
    stability: m.stability,
    source: m.source,
    age: "",
    created_at: m.createdAt.toISOString(),
    hub_id: m.hubId,
  }));
}

/** The recall tool: done once per turn, its sources kept on the call until the turn ends, so a resumed turn answers from the same. */
async function recallStep(turn: Turn, query: string, scope: string[]): Promise<RecalledMemory[]> {
  if (!turn.session.tools.includes("recall")) return [];
  const done = turn.toolCalls.find((c) => c.name === "recall" && c.status === "done");
  if (done) return stillReadable(turn, (done.result?.sources as RecalledMemory[] | undefined) ?? [], scope);
  const call: ChatToolCall = { id: `call_${newId()}`, name: "recall", arguments: { query, hub_ids: scope }, status: "done" };
  await emit(turn, "message.tool_call", { tool_call: { id: call.id, name: call.name, arguments: call.arguments } });
  const found = scope.length === 0 ? [] : (await recallMemories(turn.ctx, { query, limit: RECALL_LIMIT, hub_ids: scope })).memories;
  const sources = found.map((m) => ({ ...m, chunk_content: m.chunk_content.slice(0, SOURCE_CHARS) }));
  call.result = { memories: sources.map((m) => ({ id: m.id, title: m.title, hub_id: m.hub_id, relevance_score: m.relevance_score })), sources };
  turn.toolCalls.push(call);
  await saveToolCalls(turn);
  await emit(turn, "message.tool_result", { tool_call_id: call.id, name: call.name, result: { memories: call.result.memories } });
  return sources;
}

/**
 * The kept sources of a turn taken over from a worker that died: only those the owner can still read
 * in this turn's scope. The owner may have lost the hub (or the memory was deleted) since the recall.
 */
async function stillReadable(turn: Turn, sources: RecalledMemory[], scope: string[]): Promise<RecalledMemory[]> {
  if (sources.length === 0 || scope.length === 0) return [];
  const rows = await turn.ctx.db.memory.findMany({
    where: { AND: [memoryAccessWhere(turn.ctx), { id: { in: sources.map((s) => s.id) } }, { hubId: { in: scope } }] },
    select: { id: true },
  });
  const readable = new Set(rows.map((r) => r.id));
  return sources.filter((s) => readable.has(s.id));
}

/**
 * The push_memory tool: asks for approval (the turn pauses), then saves with the approving
 * request's credential, or reports the refusal. Returns the reply, or "paused".
 */
async function pushMemoryStep(turn: Turn, text: string, scope: string[]): Promise<string> {
  const db = turn.database.prisma;
  let call = turn.toolCalls.find((c) => c.name === "push_memory");
  if (!call) {
    call = { id: `call_${newId()}`, name: "push_memory", arguments: { content: text }, status: "awaiting_approval" };
    const target = await writeHub(turn, scope);
    turn.toolCalls.push(call);
    await emit(turn, "message.tool_call", { tool_call: { id: call.id, name: call.name, arguments: call.arguments } });
    if (typeof target === "string") {
      call.status = "failed";
      call.result = { error: target };
      await saveToolCalls(turn);
      await emit(turn, "message.tool_result", { tool_call_id: call.id, name: call.name, result: call.result });
      return `I did not save it: ${target}.`;
    }
    call.arguments = { content: text, hub_id: target.id, hub_name: target.name };
    const approvalId = newId();
    call.approval_id = approvalId;
    const expiresAt = new Date(Date.now() + CHAT_LIMITS.approvalMs);
    await db.$transaction(async (tx) => {
      // The session's lock first, as every change of a turn's state takes it (cancel, delete, decide,
      // finish): a cancel that committed just before must end the turn, not leave it paused on an
      // approval with the session still locked.
      await lockForTransaction(tx, chatSessionLockKey(turn.session.id));
      const { status } = await leaseOrThrow(tx, turn);
      if (status === "canceling") throw new Canceled();
      await tx.chatApproval.create({
        data: { id: approvalId, sessionId: turn.session.id, messageId: turn.message.id, toolCallId: call!.id, toolName: call!.name, arguments: call!.arguments as Prisma.InputJsonValue, expiresAt },
      });
      await tx.chatMessage.update({ where: { id: turn.message.id }, data: { toolCalls: turn.toolCalls as unknown as Prisma.InputJsonValue, leaseOwner: null } });
      await tx.chatSession.updateMany({ where: { id: turn.session.id, activeMessageId: turn.message.id, status: "running" }, data: { status: "awaiting_approval" } });
      await appendChatEvent(tx, turn.message.id, "approval.required", {
        approval_id: approvalId,
        tool_call_id: call!.id,
        tool_name: call!.name,
        arguments: call!.arguments,
        expires_at: expiresAt.toISOString(),
      });
    });
    notifyChatEvent(turn.message.id);
    return "paused";
  }
  if (call.status === "awaiting_approval") {
    const approval = await db.chatApproval.findFirst({ where: { messageId: turn.message.id, toolCallId: call.id } });
    if (!approval || approval.status === "pending") throw new Error("push_memory resumed before its decision");
    if (approval.status === "approved") {
      try {
        // Recorded with the memory (saveMemory): a turn taken over after the save finds the call done.
        call.result = await saveMemory(turn, approval, call, text);
        call.status = "done";
        notifyChatEvent(turn.message.id);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        call.status = "failed";
        call.result = { error: error.message };
      }
    } else {
      call.status = approval.status === "timed_out" ? "timed_out" : "denied";
      call.result = { status: approval.status };
    }
    if (call.status !== "done") {
      await saveToolCalls(turn);
      await emit(turn, "message.tool_result", { tool_call_id: call.id, name: call.name, result: call.result });
    }
  }
  const hubName = String(call.arguments.hub_name ?? "");
  if (call.status === "done") {
    const title = String(call.result?.title ?? "");
    return `Saved to “${hubName}”: “${title}”${/[.!?。！？]$/.test(title) ? "" : "."}`;
  }
  if (call.status === "denied") return "I did not save it: you declined.";
  if (call.status === "timed_out") return "I did not save it: the approval was not given in time.";
  return `I did not save it: ${String(call.result?.error ?? "it could not be saved")}.`;
}

/** The hub a save goes to: the session's write hub, else the personal hub, else the one writable hub in scope. */
async function writeHub(turn: Turn, scope: string[]): Promise<{ id: string; name: string } | string> {
  if (!credentialWrites(turn.ctx.credential)) return "this chat was sent with a read-only key";
  const writable = (await readableHubs(turn.ctx)).filter((m) => scope.includes(m.hub.id) && ["owner", "admin", "contributor"].includes(m.role));
  const chosen = turn.session.writeHubId
    ? writable.find((m) => m.hub.id === turn.session.writeHubId)
    : (writable.find((m) => m.hub.hubType === "personal") ?? (writable.length === 1 ? writable[0] : undefined));
  if (chosen) return { id: chosen.hub.id, name: chosen.hub.name };
  return turn.session.writeHubId ? "you can no longer write to this chat's write hub" : "this chat has no write hub; set write_hub_id to choose one";
}

/**
 * Saves the approved memory and, in the same transaction, marks the call done on the message (still
 * leased to this worker) with its tool_result event. A worker that stops after the save has recorded
 * it, and one that lost its lease meanwhile saves nothing: the save happens once, whoever takes over
 * (a second save would add a duplicate once the first memory was edited, moved or deleted).
 */
async function saveMemory(turn: Turn, approval: ChatApproval, call: ChatToolCall, text: string): Promise<Record<string, unknown>> {
  const hubId = String((approval.arguments as { hub_id?: string }).hub_id ?? "");
  const ctx: AuthContext = { ...turn.ctx, credential: credentialFrom(approval.credential) };
  const membership = await hubPermissionOrThrow(ctx, hubId, "memories.write", "save memories");
  const hubCtx: HubContext = { ...ctx, hub: membership.hub, role: membership.role };
  let result: Record<string, unknown> = {};
  await createMemory(hubCtx, { content: text, source: "chat", initiation_type: "human_requested_agent" } as Parameters<typeof createMemory>[1], {
    // The message's row before the server-wide events lock (memory.created takes it): an account-data
    // deletion locks the message rows (its chat sessions' cascade) and then the events lock, so taking
    // the row after the events lock, as the record below would, could deadlock with it. Order here:
    // the memory's locks, the message row (this lease check), the memory's writes and its event, then
    // the record on the row already held.
    underLock: async (tx) => {
      await leaseOrThrow(tx, turn);
    },
    inTransaction: async (tx, memory) => {
      result = { memory_id: memory.id, hub_id: hubId, title: memory.title };
      const toolCalls = turn.toolCalls.map((c) => (c.id === call.id ? { ...c, status: "done", result } : c));
      await tx.chatMessage.update({ where: { id: turn.message.id }, data: { toolCalls: toolCalls as unknown as Prisma.InputJsonValue } });
      await appendChatEvent(tx, turn.message.id, "message.tool_result", { tool_call_id: call.id, name: call.name, result }, { heartbeat: true });
    },
  });
  return result;
}

async function modelAnswer(turn: Turn, question: ChatMessage, sources: RecalledMemory[], scope: string[], model: NonNullable<ReturnType<typeof chatModel>>): Promise<number[]> {
  const prompt = buildPrompt(question.content, sources);
  const persona = await personaText(turn);
  const history = await historyText(turn, question, scope);
  const stop = new AbortController();
  const unwatch = watchCancel(turn, stop);
  const stream = streamModelAnswer(
    model,
    {
      ...prompt,
      system: persona ? `${prompt.system}\n\nSpeak as this persona (its voice only; the rules above still hold):\n${persona}` : prompt.system,
      prompt: history ? `Earlier in this conversation (context, not sources):\n${history}\n\n${prompt.prompt}` : prompt.prompt,
    },
    stop.signal,
  );
  let buffer = "";
  let flushed = Date.now();
  try {
    for await (const delta of stream.deltas) {
      buffer += delta;
      if (buffer.length >= FLUSH_CHARS || Date.now() - flushed >= FLUSH_MS) {
        await writeText(turn, [buffer]);
        buffer = "";
        flushed = Date.now();
      }
    }
  } catch (error) {
    // Stopped for a cancel: the turn ends canceled with what it wrote, not with the fallback answer.
    if (stop.signal.aborted) throw new Canceled();
    throw error;
  } finally {
    unwatch();
  }
  if (buffer) await writeText(turn, [buffer]);
  return parseCitations(turn.content, sources.length);
}

/**
 * Aborts `stop` once the turn is being canceled (a cancel, or its chat deleted). Text is written only
 * between the model's pieces, where a cancel is otherwise noticed: a model that is slow to write (or
 * says nothing until its time runs out) would keep the turn, and its session, canceling meanwhile.
 */
function watchCancel(turn: Turn, stop: AbortController): () => void {
  let checking = false;
  const check = () => {
    if (checking || stop.signal.aborted) return;
    checking = true;
    void turn.database.prisma.chatMessage
      .findUnique({ where: { id: turn.message.id }, select: { status: true } })
      .then((row) => {
        if (row?.status === "canceling") stop.abort();
      })
      .catch(() => undefined)
      .finally(() => {
        checking = false;
      });
  };
  // A cancel in this process wakes the turn at once; one in another is seen by the poll.
  const unsubscribe = onChatEvent(turn.message.id, check);
  const timer = setInterval(check, CANCEL_POLL_MS);
  timer.unref();
  return () => {
    unsubscribe();
    clearInterval(timer);
  };
}

async function personaText(turn: Turn): Promise<string> {
  let id = turn.session.personaId;
  if (id === "none") return "";
  if (id === "") id = (await turn.ctx.db.userSetting.findUnique({ where: { userId: turn.session.ownerId }, select: { chatDefaultPersonaId: true } }))?.chatDefaultPersonaId ?? "";
  if (!id || id === "none") return "";
  const config = await turn.ctx.db.agentConfig.findFirst({
    where: { id, ownerId: turn.session.ownerId, deletedAt: null },
    select: { content: true, filePath: true, deletedAt: true, version: true, personaHiddenVersion: true },
  });
  // A persona deleted since it was chosen (hidden, its file kept) is gone for chats too, as from the list.
  return config && isPersonaConfig(config) ? config.content.slice(0, 4_000) : "";
}

/**
 * The finished turns before the question (a regenerated answer's predecessors included: they are what
 * was said). An answer is written from the hubs its turn read (scope_hub_ids_used), so one that read a
 * hub outside this turn's scope (lost since, or out of the sending credential's reach) is left out:
 * the model would be handed what the caller can no longer read. The caller's own messages stay.
 */
async function historyText(turn: Turn, question: ChatMessage, scope: string[]): Promise<string> {
  const rows = await turn.ctx.db.chatMessage.findMany({
    where: { sessionId: turn.session.id, sequence: { lt: question.sequence }, status: "completed" },
    orderBy: { sequence: "desc" },
    take: HISTORY_TURNS * 2,
    select: { role: true, content: true, scopeHubIdsUsed: true },
  });
  const readable = new Set(scope);
  return rows
    .reverse()
    .filter((r) => r.role === "user" || r.scopeHubIdsUsed.every((hubId) => readable.has(hubId)))
    .map((r) => `${r.role}: ${r.content.slice(0, 1_000)}`)
    .join("\n");
}

/** Streams text: each piece is one message.text event, and the content so far is kept on the row. */
async function writeText(turn: Turn, pieces: string[]): Promise<void> {
  for (const text of pieces) {
    await turn.database.prisma.$transaction(async (tx) => {
      const row = await leaseOrThrow(tx, turn);
      if (row.status === "canceling") throw new Canceled();
      turn.content += text;
      await tx.chatMessage.update({ where: { id: turn.message.id }, data: { content: turn.content } });
      await appendChatEvent(tx, turn.message.id, "message.text", { text }, { heartbeat: true });
    });
    notifyChatEvent(turn.message.id);
  }
}

async function emit(turn: Turn, type: string, data: Record<string, unknown>): Promise<void> {
  await turn.database.prisma.$transaction(async (tx) => {
    const named = await holdNamedMemories(tx, turn, data);
    const row = await leaseOrThrow(tx, turn);
    if (row.status === "canceling") throw new Canceled();
    await appendChatEvent(tx, turn.message.id, type, data, { heartbeat: true });
    await scrubNamed(tx, turn, named);
  });
  notifyChatEvent(turn.message.id);
}

async function saveToolCalls(turn: Turn): Promise<void> {
  await turn.database.prisma.$transaction(async (tx) => {
    const named = await holdNamedMemories(tx, turn, turn.toolCalls);
    const { count } = await tx.chatMessage.updateMany({
      where: { id: turn.message.id, leaseOwner: turn.owner },
      data: { toolCalls: turn.toolCalls as unknown as Prisma.InputJsonValue, heartbeatAt: new Date() },
    });
    if (count) await scrubNamed(tx, turn, named);
  });
}

/**
 * Holds the memories `doc` names (KEY SHARE, to the caller's commit) and returns those gone and those
 * moved out of the owner's reach. A turn writes what it read of them (titles, a recall's passages)
 * while it runs, and a hard delete or a move scrubs only what is stored when it commits: held, one
 * under way commits first (and what it took is scrubbed by scrubNamed), or waits and its own scrub
 * (drop-memory-copies.ts) finds what this writes. KEY SHARE is enough for a move too, which locks its
 * rows FOR UPDATE before it writes (batch-move-memories.ts), and unlike SHARE it does not wait for, nor
 * hold up, the ordinary writes of a memory (access counts, processing, edits).
 * Taken before the message row, as a delete or move locks the memory before its scrub locks the message.
 */
async function holdNamedMemories(tx: Prisma.TransactionClient, turn: Turn, doc: unknown): Promise<{ gone: string[]; away: string[] }> {
  const named = [...namedMemoryIds(doc)].sort();
  if (named.length === 0) return { gone: [], away: [] };
  const rows = await tx.$queryRaw<{ id: string; hub: string }[]>`SELECT id::text AS id, hub_id::text AS hub FROM memories WHERE id = ANY(${named}::uuid[]) ORDER BY id FOR KEY SHARE`;
  // A statement of its own: it reads what the holders the lock waited for committed.
  const hubs = [...new Set(rows.map((row) => row.hub))];
  const readable = new Set(
    (await tx.$queryRaw<{ hub: string }[]>`SELECT hub_id::text AS hub FROM hub_members WHERE user_id = ${turn.session.ownerId}::uuid AND hub_id = ANY(${hubs}::uuid[])`).map((row) => row.hub),
  );
  const alive = new Set(rows.map((row) => row.id));
  return { gone: named.filter((id) => !alive.has(id)), away: rows.filter((row) => !readable.has(row.hub)).map((row) => row.id) };
}

/** The message's stored tool results, citations and events as a delete's or move's scrub leaves them: "(deleted)" or "(moved)", passages gone. */
async function scrubNamed(tx: Prisma.TransactionClient, turn: Turn, { gone, away }: { gone: string[]; away: string[] }): Promise<void> {
  for (const [ids, title] of [[gone, "(deleted)"], [away, "(moved)"]] as const) {
    if (ids.length === 0) continue;
    await tx.$executeRaw`
      UPDATE chat_messages SET tool_calls = chat_scrub_memory_titles(tool_calls, ${ids}::text[], ${title}::text), citations = chat_scrub_memory_titles(citations, ${ids}::text[], ${title}::text)
       WHERE id = ${turn.message.id}::uuid`;
    await tx.$executeRaw`
      UPDATE chat_events SET data = chat_scrub_memory_titles(data, ${ids}::text[], ${title}::text) WHERE message_id = ${turn.message.id}::uuid AND chat_named_memory_ids(data) && ${ids}::text[]`;
  }
}

/** The message row locked for this statement's transaction, still leased to this worker. */
async function leaseOrThrow(tx: Prisma.TransactionClient, turn: Turn): Promise<{ status: string }> {
  // An UPDATE takes the row lock; rolled back with the rest when the lease is someone else's.
  const row = await tx.chatMessage.update({ where: { id: turn.message.id }, data: { heartbeatAt: new Date() }, select: { status: true, leaseOwner: true } });
  if (row.leaseOwner !== turn.owner) throw new LostLease();
  return row;
}

async function release(turn: Turn): Promise<void> {
  await turn.database.prisma.chatMessage.updateMany({ where: { id: turn.message.id, leaseOwner: turn.owner }, data: { leaseOwner: null } });
}

/** An approval past its time: timed out, announced, and its turn free to go on. */
export async function expireApproval(db: Database["prisma"], approval: ChatApproval): Promise<boolean> {
  const expired = await db.$transaction(async (tx) => {
    await lockForTransaction(tx, chatSessionLockKey(approval.sessionId));
    const { count } = await tx.chatApproval.updateMany({ where: { id: approval.id, status: "pending" }, data: { status: "timed_out", decidedAt: new Date() } });
    if (count === 0) return false;
    await tx.chatSession.updateMany({ where: { id: approval.sessionId, activeMessageId: approval.messageId, status: "awaiting_approval" }, data: { status: "running" } });
    await appendChatEvent(tx, approval.messageId, "approval.decided", { approval_id: approval.id, status: "timed_out" });
    return true;
  });
  if (expired) notifyChatEvent(approval.messageId);
  return expired;
}

/**
 * The tool calls as a finished turn keeps them: a recall names what it found, but the passages it read
 * were only for answering. Kept, they would be copies of those memories' text that outlive a hard
 * delete of the memory or of its hub.
 */
function withoutPassages(calls: ChatToolCall[]): ChatToolCall[] {
  return calls.map((call) => {
    if (!call.result || !("sources" in call.result)) return call;
    const { sources: _passages, ...result } = call.result;
    return { ...call, result };
  });
}

/** The memories a stored document names, as chat_named_memory_ids reads it: any memory_id, and the ids of a memories or sources list. */
function namedMemoryIds(doc: unknown, ids = new Set<string>()): Set<string> {
  const add = (value: unknown) => typeof value === "string" && isUuid(value) && ids.add(value);
  if (Array.isArray(doc)) for (const item of doc) namedMemoryIds(item, ids);
  else if (doc && typeof doc === "object") {
    for (const [key, value] of Object.entries(doc)) {
      if (key === "memory_id") add(value);
      if ((key === "memories" || key === "sources") && Array.isArray(value)) for (const item of value) add((item as { id?: unknown } | null)?.id);
      namedMemoryIds(value, ids);
    }
  }
  return ids;
}

/** The terminal write: the message, its session's lock, leftover approvals and the terminal event, at once. */
async function finish(
  turn: Turn,
  status: "completed" | "partial_failed" | "failed" | "canceled",
  fields: { citations?: unknown; usage?: unknown; error?: unknown },
): Promise<void> {
  await turn.database.prisma.$transaction(async (tx) => {
    // The session's lock first, as a send, cancel or decision takes it: the rows below are then
    // locked in one order by everyone (no deadlock with a decision touching the same approval).
    await lockForTransaction(tx, chatSessionLockKey(turn.session.id));
    // Unheld, a memory deleted (or moved out of the owner's reach) while the turn ran was written back
    // here by title after the delete had scrubbed the turn.
    const named = await holdNamedMemories(tx, turn, [turn.toolCalls, fields.citations]);
    // A cancel registered since the last check wins: its caller was told the turn is stopping.
    const final = (await leaseOrThrow(tx, turn)).status === "canceling" ? "canceled" : status;
    const now = new Date();
    const message = await tx.chatMessage.update({
      where: { id: turn.message.id },
      data: {
        status: final,
        content: turn.content,
        toolCalls: turn.toolCalls.length ? (withoutPassages(turn.toolCalls) as unknown as Prisma.InputJsonValue) : undefined,
        ...(fields.citations !== undefined && { citations: fields.citations as Prisma.InputJsonValue }),
        ...(fields.usage !== undefined && { usage: fields.usage as Prisma.InputJsonValue }),
        ...(fields.error !== undefined && { error: fields.error as Prisma.InputJsonValue }),
        leaseOwner: null,
        finishedAt: now,
        startedAt: turn.message.startedAt ?? now,
      },
    });
    // An approval still waiting when the turn ends (a cancel) is denied, and its stream says so first.
    const waiting = await tx.chatApproval.findMany({ where: { messageId: turn.message.id, status: "pending" }, select: { id: true } });
    if (waiting.length) {
      await tx.chatApproval.updateMany({ where: { id: { in: waiting.map((a) => a.id) } }, data: { status: "denied", decidedAt: now } });
      for (const approval of waiting) await appendChatEvent(tx, turn.message.id, "approval.decided", { approval_id: approval.id, status: "denied" });
    }
    await tx.chatSession.updateMany({
      where: { id: turn.session.id, activeMessageId: turn.message.id },
      data: { status: "idle", activeMessageId: null, lockedAt: null, lastMessageAt: now, activityAt: now },
    });
    await appendChatEvent(tx, turn.message.id, `message.${final}`, { message: serializeChatMessage(message) });
    await scrubNamed(tx, turn, named);
  });
  notifyChatEvent(turn.message.id);
}
