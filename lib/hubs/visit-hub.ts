import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUuid } from "@/lib/ids.ts";
import { RECEIPT_KINDS } from "@/lib/notifications/notification-kinds.ts";
import { membershipWhere } from "./hub-access.ts";

/**
 * Records the caller's last visit (the hub header counts activity since then) and is the read receipt
 * of the hub's updates: the caller's unseen receipt notifications about the hub (joins, transfers done,
 * failed processing, finished dreams) become seen. Decisions (invites, transfers to accept,
 * contradictions) stay unseen: looking at the hub does not answer them.
 */
export async function visitHub(ctx: AuthContext, hubId: string) {
  const visitedAt = ctx.now();
  const { count } = isUuid(hubId)
    ? await ctx.db.hubMember.updateMany({ where: { AND: [{ hubId }, membershipWhere(ctx)] }, data: { lastVisitedAt: visitedAt } })
    : { count: 0 };
  if (count === 0) throw new ApiError("not_found", "Hub not found");
  await ctx.db.notification.updateMany({
    where: { userId: ctx.user.id, hubId, kind: { in: [...RECEIPT_KINDS] }, status: "pending", seenAt: null },
    data: { seenAt: visitedAt },
  });
  return { hub_id: hubId, visited_at: visitedAt.toISOString(), status: "ok" as const };
}
