import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { findChatMessageOrThrow } from "./chat-access.ts";
import { kickChatTurn } from "./chat-turn-runner.ts";
import { assertRoom, lockChatSession, resumeUrl, sessionLocked, startTurn } from "./send-chat-message.ts";
import { serializeChatMessage } from "./serialize-chat.ts";

const ELIGIBLE = ["completed", "partial_failed", "failed"];

/**
 * POST …/messages/{id}/regenerate: a new answer to the same question, linked to the answer it
 * replaces. Only the conversation's last answer is eligible, and not when canceled (the person chose
 * to stop: send again instead).
 */
export async function regenerateChatMessage(ctx: AuthContext, sessionId: string, messageId: string) {
  const { session: found, message: prior } = await findChatMessageOrThrow(ctx, sessionId, messageId);
  if (prior.role !== "assistant") throw new ApiError("invalid_request", "Only an assistant message can be regenerated");
  const assistant = await ctx.db.$transaction(async (tx) => {
    const session = await lockChatSession(tx, found.id);
    if (session.status !== "idle") throw sessionLocked(session);
    const current = await tx.chatMessage.findUniqueOrThrow({ where: { id: prior.id } });
    if (!ELIGIBLE.includes(current.status)) {
      throw new ApiError("regenerate_not_eligible", `A ${current.status} answer cannot be regenerated; send the message again`, { status: current.status });
    }
    if (await tx.chatMessage.findFirst({ where: { parentMessageId: current.id, role: "assistant" }, select: { id: true } })) {
      throw new ApiError("regenerate_not_eligible", "A newer answer already replaced this one; regenerate that one instead");
    }
    // Only the conversation's last answer: a new answer to an earlier question would land after later ones.
    if (current.sequence !== session.messageCount) {
      throw new ApiError("regenerate_not_eligible", "Only the last answer of the conversation can be regenerated");
    }
    assertRoom(session, 1);
    return startTurn(tx, ctx, session, current.id, 1);
  });
  await kickChatTurn(assistant.id);
  return {
    outcome: "fresh" as const,
    prior_assistant_id: prior.id,
    prior_assistant_status: prior.status,
    assistant_message: serializeChatMessage(assistant),
    active_message_id: assistant.id,
    resume_url: resumeUrl(found.id, assistant.id),
  };
}
