import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { ChatMessage, ChatSession } from "@/lib/db/generated/client.ts";
import { newId } from "@/lib/ids.ts";
import { findChatSessionOrThrow, turnScope } from "./chat-access.ts";
import { CHAT_LIMITS, chatSessionLockKey, isTerminal, TOOLSET_VERSION, type SendChatMessageBody } from "./chat-fields.ts";
import { kickChatTurn } from "./chat-turn-runner.ts";
import { credentialSnapshot } from "./run-chat-turn.ts";
import { serializeChatMessage } from "./serialize-chat.ts";

export const resumeUrl = (sessionId: string, messageId: string) => `/v1/chat/sessions/${sessionId}/messages/${messageId}/stream`;

/** The session re-read under its lock: a turn starts, is canceled or regenerated one at a time. */
export async function lockChatSession(tx: DbClient, sessionId: string): Promise<ChatSession> {
  await lockForTransaction(tx, chatSessionLockKey(sessionId));
  const session = await tx.chatSession.findUnique({ where: { id: sessionId } });
  if (!session || session.deletedAt) throw new ApiError("not_found", "Chat session not found");
  return session;
}

export function sessionLocked(session: ChatSession): ApiError {
  return new ApiError("chat_session_locked", "A turn is in progress in this session; follow its stream or cancel it first", {
    active_message_id: session.activeMessageId,
    resume_url: session.activeMessageId ? resumeUrl(session.id, session.activeMessageId) : "",
  });
}

/** The newest answer to a user message (a regenerated answer replaces the one before it). */
async function latestAnswer(tx: DbClient, userMessage: ChatMessage): Promise<ChatMessage> {
  let answer = await tx.chatMessage.findFirst({ where: { parentMessageId: userMessage.id, role: "assistant" }, orderBy: { sequence: "asc" } });
  for (let next = answer; next; ) {
    answer = next;
    next = await tx.chatMessage.findFirst({ where: { parentMessageId: next.id, role: "assistant" }, orderBy: { sequence: "desc" } });
  }
  if (!answer) throw new Error(`user message ${userMessage.id} has no answer`);
  return answer;
}

/** A new assistant row, queued, and its session locked to it (inside the session's lock). */
export async function startTurn(tx: DbClient, ctx: AuthContext, session: ChatSession, parentId: string, rows: number, title?: string): Promise<ChatMessage> {
  const now = ctx.now();
  const assistant = await tx.chatMessage.create({
    data: {
      id: newId(now.getTime()),
      sessionId: session.id,
      sequence: session.messageCount + rows,
      role: "assistant",
      authorUserId: ctx.user.id,
      status: "queued",
      parentMessageId: parentId,
      toolsetVersionUsed: TOOLSET_VERSION,
      credential: credentialSnapshot(ctx.credential),
      createdAt: now,
    },
  });
  await tx.chatSession.update({
    where: { id: session.id },
    data: { status: "running", activeMessageId: assistant.id, lockedAt: now, messageCount: session.messageCount + rows, lastMessageAt: now, activityAt: now, ...(title && { title }) },
  });
  return assistant;
}

export function assertRoom(session: ChatSession, rows: number): void {
  if (session.messageCount + rows > CHAT_LIMITS.messagesPerSession) {
    throw new ApiError("chat_session_full", `A session holds at most ${CHAT_LIMITS.messagesPerSession} messages; start a new session`);
  }
}

/**
 * POST /v1/chat/sessions/{id}/messages: the user's message and a queued answer, in one transaction
 * under the session's lock. A repeated idempotency_key returns the first send's turn: its answer
 * when finished (replay, 200), else the turn in flight (202).
 */
export async function sendChatMessage(ctx: AuthContext, sessionId: string, input: SendChatMessageBody) {
  const found = await findChatSessionOrThrow(ctx, sessionId);
  const key = input.idempotency_key || null;
  const result = await ctx.db.$transaction(async (tx) => {
    const session = await lockChatSession(tx, found.id);
    if (key) {
      const prior = await tx.chatMessage.findUnique({ where: { sessionId_idempotencyKey: { sessionId: session.id, idempotencyKey: key } } });
      if (prior) {
        if (prior.content !== input.content) throw new ApiError("conflict", "This idempotency_key was already used for a different message");
        const answer = await latestAnswer(tx, prior);
        return { outcome: isTerminal(answer.status) ? ("replay" as const) : ("in_flight" as const), user: prior, assistant: answer };
      }
    }
    if (session.status !== "idle") throw sessionLocked(session);
    assertRoom(session, 2);
    const now = ctx.now();
    const user = await tx.chatMessage.create({
      data: {
        id: newId(now.getTime()),
        sessionId: session.id,
        sequence: session.messageCount + 1,
        role: "user",
        authorUserId: ctx.user.id,
        status: "completed",
        scopeHubIdsUsed: await turnScope({ ...ctx, db: tx }, session),
        content: input.content,
        idempotencyKey: key,
        toolsetVersionUsed: TOOLSET_VERSION,
        startedAt: now,
        finishedAt: now,
        createdAt: now,
      },
    });
    // An untitled session is named after its first message.
    const assistant = await startTurn(tx, ctx, session, user.id, 2, session.title ? undefined : input.content.replace(/\s+/g, " ").slice(0, 80));
    return { outcome: "fresh" as const, user, assistant };
  });
  if (result.outcome === "fresh") await kickChatTurn(result.assistant.id);
  return {
    status: result.outcome === "replay" ? 200 : 202,
    body: {
      outcome: result.outcome,
      user_message_id: result.user.id,
      assistant_message: serializeChatMessage(result.assistant),
      active_message_id: result.assistant.id,
      resume_url: resumeUrl(found.id, result.assistant.id),
    },
  };
}
