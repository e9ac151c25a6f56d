import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import type { CustomBoard } from "@/lib/db/generated/client.ts";
import type { ResolveSlotBody } from "./decision-gate-fields.ts";
import { serializeCustomSlot } from "./serialize-custom-board.ts";

/**
 * A custom board's card: `ack` (read it), `dismiss`, or `reopen`. A card refreshed with new content
 * is fresh again whatever it was. There is nothing to choose, and feedback is not recorded here.
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
    default:
      throw new ApiError("invalid_request", `A board's card is answered with "ack", "dismiss" or "reopen", not "${input.action}"`, {
        issues: [{ path: "action", message: "ack, dismiss or reopen" }],
      });
  }
  const updated = await ctx.db.customBoard.update({ where: { id: board.id }, data });
  return { slot: serializeCustomSlot(updated)! };
}
