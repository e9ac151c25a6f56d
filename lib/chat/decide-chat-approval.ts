import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUuid } from "@/lib/ids.ts";
import { findChatSessionOrThrow } from "./chat-access.ts";
import { appendChatEvent, notifyChatEvent } from "./chat-events.ts";
import { kickChatTurn } from "./chat-turn-runner.ts";
import { credentialSnapshot } from "./run-chat-turn.ts";
import { lockChatSession } from "./send-chat-message.ts";

/**
 * POST /v1/chat/sessions/{id}/approvals/{approval_id}: approve or deny a waiting tool call, once.
 * The tool then runs with this request's credential, so a key that could not make the change
 * cannot approve it into being.
 */
export async function decideChatApproval(ctx: AuthContext, sessionId: string, approvalId: string, decision: "approve" | "deny") {
  const session = await findChatSessionOrThrow(ctx, sessionId);
  const found = isUuid(approvalId) ? await ctx.db.chatApproval.findFirst({ where: { id: approvalId, sessionId: session.id } }) : null;
  if (!found) throw new ApiError("not_found", "Approval not found");
  const now = ctx.now();
  const outcome = await ctx.db.$transaction(async (tx) => {
    await lockChatSession(tx, session.id);
    const approval = await tx.chatApproval.findUniqueOrThrow({ where: { id: found.id } });
    if (approval.status !== "pending") return { kind: "decided" as const, status: approval.status };
    const status = approval.expiresAt <= now ? "timed_out" : decision === "approve" ? "approved" : "denied";
    await tx.chatApproval.update({
      where: { id: approval.id },
      data: { status, decidedAt: now, ...(status === "approved" && { credential: credentialSnapshot(ctx.credential) }) },
    });
    await tx.chatSession.updateMany({ where: { id: session.id, activeMessageId: approval.messageId, status: "awaiting_approval" }, data: { status: "running" } });
    await appendChatEvent(tx, approval.messageId, "approval.decided", { approval_id: approval.id, status, decided_by: ctx.user.id });
    return { kind: "now" as const, status };
  });
  if (outcome.kind === "decided") {
    if (outcome.status === "timed_out") throw new ApiError("chat_approval_timeout", "This approval timed out before it was decided", { status: "timed_out" });
    throw new ApiError("chat_approval_already_decided", `This approval was already ${outcome.status.replace("_", " ")}`, { status: outcome.status });
  }
  notifyChatEvent(found.messageId);
  await kickChatTurn(found.messageId);
  if (outcome.status === "timed_out") throw new ApiError("chat_approval_timeout", "This approval timed out before it was decided", { status: "timed_out" });
  return { approval_id: found.id, status: outcome.status };
}
