import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import type { CustomBoard } from "@/lib/db/generated/client.ts";
import { lockMembershipOrThrow, type Membership } from "@/lib/hubs/hub-access.ts";
import { liveCardFeedback, type Verdict } from "./card-feedback.ts";
import { customBoardLockKey } from "./custom-board-fields.ts";
import type { ResolveSlotBody } from "./decision-gate-fields.ts";
import { serializeCustomSlot } from "./serialize-custom-board.ts";

const CARD_ACTIONS = ["ack", "dismiss", "reopen", "feedback"];

/**
 * A custom board's card: `ack` (read it), `dismiss`, `reopen`, or `feedback` (a verdict on its
 * answer, then read). A card refreshed with new content is fresh again whatever it was. There is
 * nothing to choose.
 *
 * Under the board's lock, the lock a refresh writes under, with the card read again there: an action
 * is about the answer standing when it lands, and a card emptied meanwhile (a new instruction) is not
 * found. A sender that names the answer it read (`content_updated_at`, as the dashboard does) is
 * refused once a refresh replaced it, rather than settling or judging an answer it never saw. The
 * caller's membership is checked again under the same transaction, so a member removed meanwhile
 * changes nothing.
 */
export async function resolveCustomSlot(ctx: AuthContext, membership: Membership, board: CustomBoard, input: ResolveSlotBody) {
  if (!CARD_ACTIONS.includes(input.action)) {
    throw new ApiError("invalid_request", `A board's card is answered with "ack", "dismiss", "reopen" or "feedback", not "${input.action}"`, {
      issues: [{ path: "action", message: "ack, dismiss, reopen or feedback" }],
    });
  }
  if (input.action === "feedback" && !input.verdict) {
    throw new ApiError("invalid_request", "feedback needs a verdict: accurate or inaccurate", { issues: [{ path: "verdict", message: "accurate or inaccurate" }] });
  }
  const now = ctx.now();
  const updated = await ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, customBoardLockKey(board.id));
    await lockMembershipOrThrow(tx, ctx, membership.hub, "memories.write", "answer cards");
    const current = await tx.customBoard.findUnique({ where: { id: board.id } });
    if (!current?.cardPayload || !current.cardContentUpdatedAt) throw new ApiError("not_found", "No such card on this hub's boards");
    const judged = input.content_updated_at;
    if (judged !== undefined && new Date(judged).getTime() !== current.cardContentUpdatedAt.getTime()) {
      throw new ApiError("conflict", "The card has a newer answer than the one read: read it again", { content_updated_at: current.cardContentUpdatedAt.toISOString() });
    }
    const receipt = (action: string, verdict?: Verdict) => ({ action, ...(verdict && { verdict }), resolved_by: ctx.user.id, resolved_at: now.toISOString() });
    let data: Prisma.CustomBoardUpdateInput;
    switch (input.action) {
      case "ack":
        data = { cardState: "resolved", cardResolution: receipt("ack") };
        break;
      case "dismiss":
        data = { cardState: "dismissed", cardResolution: receipt("dismiss") };
        break;
      case "reopen":
        data = { cardState: "seen", cardResolution: Prisma.DbNull };
        break;
      default: {
        const verdict = input.verdict!;
        const key = { boardId: current.id, contentProducedAt: current.cardContentUpdatedAt, userId: ctx.user.id };
        await tx.customBoardFeedback.upsert({
          where: { boardId_contentProducedAt_userId: key },
          create: { ...key, verdict, createdAt: now, updatedAt: now },
          update: { verdict, updatedAt: now },
        });
        // A live card settles with the verdict. A settled one keeps its receipt (Memax's idempotent
        // resolve) but the verdict counts; the caller's own feedback receipt shows the new verdict.
        const previous = current.cardResolution as { action?: string; resolved_by?: string } | null;
        const live = current.cardState === "fresh" || current.cardState === "seen";
        const ownFeedback = previous?.action === "feedback" && previous.resolved_by === ctx.user.id;
        if (!live && !ownFeedback) return current;
        data = { cardState: live ? "resolved" : current.cardState, cardResolution: receipt("feedback", verdict) };
      }
    }
    return tx.customBoard.update({ where: { id: current.id }, data });
  });
  return { slot: serializeCustomSlot(updated, await liveCardFeedback(ctx.db, updated, ctx.user.id))! };
}
