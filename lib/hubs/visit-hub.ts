import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUuid } from "@/lib/ids.ts";
import { membershipWhere } from "./hub-access.ts";

/** Records the caller's last visit (the read-receipt notifications compare against). */
export async function visitHub(ctx: AuthContext, hubId: string) {
  const visitedAt = ctx.now();
  const { count } = isUuid(hubId)
    ? await ctx.db.hubMember.updateMany({ where: { AND: [{ hubId }, membershipWhere(ctx)] }, data: { lastVisitedAt: visitedAt } })
    : { count: 0 };
  if (count === 0) throw new ApiError("not_found", "Hub not found");
  return { hub_id: hubId, visited_at: visitedAt.toISOString(), status: "ok" as const };
}
