import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { findChatMessageOrThrow } from "./chat-access.ts";
import { appendChatEvent, notifyChatEvent } from "./chat-events.ts";
import { kickChatTurn } from "./chat-turn-runner.ts";
import { lockChatSession } from "./send-chat-message.ts";

/**
 * POST …/messages/{id}/cancel: marks a turn in flight `canceling`; its worker (or, for a turn
 * waiting on an approval, the worker this wakes) ends it `canceled`. Canceling a finished turn
 * changes nothing and says so (cancel_registered: false).
 */
export async function cancelChatMessage(ctx: AuthContext, sessionId: string, messageId: string) {
  const { session, message } = await findChatMessageOrThrow(ctx, sessionId, messageId);
  if (message.role !== "assistant") throw new ApiError("invalid_request", "Only an assistant message can be canceled");
  const result = await ctx.db.$transaction(async (tx) => {
    await lockChatSession(tx, session.id);
    const current = await tx.chatMessage.findUniqueOrThrow({ where: { id: message.id }, select: { status: true } });
    if (current.status !== "queued" && current.status !== "running") return { status: current.status, registered: false };
    await tx.chatMessage.update({ where: { id: message.id }, data: { status: "canceling" } });
    await tx.chatSession.updateMany({ where: { id: session.id, activeMessageId: message.id }, data: { status: "canceling" } });
    await appendChatEvent(tx, message.id, "cancel.requested", { requested_by: ctx.user.id });
    return { status: "canceling", registered: true };
  });
  if (result.registered) {
    notifyChatEvent(message.id);
    await kickChatTurn(message.id);
  }
  return { assistant_message_id: message.id, session_id: session.id, status: result.status, cancel_registered: result.registered };
}
