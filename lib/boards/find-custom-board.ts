import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { CustomBoard } from "@/lib/db/generated/client.ts";
import { allows, forbiddenFor, type Membership } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";

/** A custom board of this hub; anything else is not found. */
export async function findCustomBoardOrThrow(ctx: Pick<AuthContext, "db">, hubId: string, boardId: string): Promise<CustomBoard> {
  const board = isUuid(boardId) ? await ctx.db.customBoard.findFirst({ where: { id: boardId, hubId } }) : null;
  if (!board) throw new ApiError("not_found", "Board not found");
  return board;
}

/** Its creator (while they may still write) or a hub manager may change or delete a custom board. */
export function assertManagesBoard(ctx: Pick<AuthContext, "user">, membership: Membership, board: CustomBoard, action: string): void {
  const own = board.createdBy === ctx.user.id && allows(membership, "memories.write");
  if (!own && !allows(membership, "hub.manage")) throw forbiddenFor(membership, action, "hub.manage");
}
