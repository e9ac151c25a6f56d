import type { AuthContext } from "@/lib/api/context.ts";
import { findChatSessionOrThrow } from "./chat-access.ts";
import { appendChatEvent, notifyChatEvent } from "./chat-events.ts";
import { kickChatTurn } from "./chat-turn-runner.ts";
import { lockChatSession } from "./send-chat-message.ts";

/**
 * DELETE /v1/chat/sessions/{id}: the session is gone for its owner (a tombstone; its messages are
 * kept with it). A turn in flight is canceled.
 */
export async function deleteChatSession(ctx: AuthContext, id: string) {
  const found = await findChatSessionOrThrow(ctx, id);
  const active = await ctx.db.$transaction(async (tx) => {
    const session = await lockChatSession(tx, found.id);
    const now = ctx.now();
    await tx.chatSession.update({ where: { id: session.id }, data: { deletedAt: now } });
    if (!session.activeMessageId) return null;
    const { count } = await tx.chatMessage.updateMany({ where: { id: session.activeMessageId, status: { in: ["queued", "running"] } }, data: { status: "canceling" } });
    if (count) await appendChatEvent(tx, session.activeMessageId, "cancel.requested", { requested_by: ctx.user.id, reason: "session_deleted" });
    return session.activeMessageId;
  });
  if (active) {
    notifyChatEvent(active);
    await kickChatTurn(active);
  }
  return { id: found.id, deleted: true };
}
