import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import type { CustomBoard } from "@/lib/db/generated/client.ts";
import { liveCardFeedback, type Verdict } from "./card-feedback.ts";
import { customBoardLockKey } from "./custom-board-fields.ts";
import type { ResolveSlotBody } from "./decision-gate-fields.ts";
import { serializeCustomSlot } from "./serialize-custom-board.ts";

/**
 * A custom board's card: `ack` (read it), `dismiss`, `reopen`, or `feedback` (a verdict on its
 * answer, then read). A card refreshed with new content is fresh again whatever it was. There is
 * nothing to choose.
 */
export async function resolveCustomSlot(ctx: AuthContext, board: CustomBoard, input: ResolveSlotBody) {
  const now = ctx.now();
  const resolution = (action: string) => ({ action, resolved_by: ctx.user.id, resolved_at: now.toISOString() });
  let data: Prisma.CustomBoardUpdateInput;
  switch (input.action) {
    case "ack":
      data = { cardState: "resolved", cardResolution: resolution("ack") };
      break;
    case "dismiss":
      data = { cardState: "dismissed", cardResolution: resolution("dismiss") };
      break;
    case "reopen":
      data = { cardState: "seen", cardResolution: Prisma.DbNull };
      break;
    case "feedback":
      return recordFeedback(ctx, board, input.verdict, input.content_updated_at);
    default:
      throw new ApiError("invalid_request", `A board's card is answered with "ack", "dismiss", "reopen" or "feedback", not "${input.action}"`, {
        issues: [{ path: "action", message: "ack, dismiss, reopen or feedback" }],
      });
  }
  const updated = await ctx.db.customBoard.update({ where: { id: board.id }, data });
  return { slot: serializeCustomSlot(updated, await liveCardFeedback(ctx.db, updated, ctx.user.id))! };
}

/**
 * Records the caller's verdict on the card's current answer (a member's latest verdict wins) and
 * settles a live card with it. A card someone already settled keeps its receipt (Memax's idempotent
 * resolve), but the verdict still counts; if the receipt is the caller's own feedback, it shows the
 * new verdict. Under the board's lock, so the verdict and the receipt are about the same answer, and a
 * rewritten instruction (no card) is not found. A sender that names the answer it read
 * (`content_updated_at`, as the dashboard does) is refused once a refresh replaced it.
 */
async function recordFeedback(ctx: AuthContext, board: CustomBoard, verdict: Verdict | undefined, judged: string | undefined) {
  if (!verdict) {
    throw new ApiError("invalid_request", "feedback needs a verdict: accurate or inaccurate", { issues: [{ path: "verdict", message: "accurate or inaccurate" }] });
  }
  const now = ctx.now();
  const updated = await ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, customBoardLockKey(board.id));
    const current = await tx.customBoard.findUnique({ where: { id: board.id } });
    if (!current?.cardPayload || !current.cardContentUpdatedAt) throw new ApiError("not_found", "No such card on this hub's boards");
    if (judged !== undefined && new Date(judged).getTime() !== current.cardContentUpdatedAt.getTime()) {
      throw new ApiError("conflict", "The card has a newer answer than the one judged: read it again", { content_updated_at: current.cardContentUpdatedAt.toISOString() });
    }
    const key = { boardId: current.id, contentProducedAt: current.cardContentUpdatedAt, userId: ctx.user.id };
    await tx.customBoardFeedback.upsert({
      where: { boardId_contentProducedAt_userId: key },
      create: { ...key, verdict, createdAt: now, updatedAt: now },
      update: { verdict, updatedAt: now },
    });
    const receipt = current.cardResolution as { action?: string; resolved_by?: string } | null;
    const live = current.cardState === "fresh" || current.cardState === "seen";
    const ownFeedback = receipt?.action === "feedback" && receipt.resolved_by === ctx.user.id;
    if (!live && !ownFeedback) return current;
    return tx.customBoard.update({
      where: { id: current.id },
      data: { cardState: live ? "resolved" : current.cardState, cardResolution: { action: "feedback", verdict, resolved_by: ctx.user.id, resolved_at: now.toISOString() } },
    });
  });
  return { slot: serializeCustomSlot(updated, await liveCardFeedback(ctx.db, updated, ctx.user.id))! };
}
