import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { membershipWhere } from "./hub-access.ts";
import type { ListQuery } from "./hub-fields.ts";
import { serializeHub } from "./serialize-hub.ts";

/** Every hub the caller belongs to, oldest first (ids are time-ordered), with role and counts. */
export async function listHubs(ctx: AuthContext, query: ListQuery) {
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const after = query.cursor ? decodeCursor(secret, "hubs", ctx.user.id, query.cursor, z.uuid()) : undefined;
  const rows = await ctx.db.hubMember.findMany({
    // The resolver's filter: a key limited to some hubs lists only those.
    where: { AND: [membershipWhere(ctx), ...(after ? [{ hubId: { gt: after } }] : [])] },
    orderBy: { hubId: "asc" },
    take: limit + 1,
    include: { hub: { include: { _count: { select: { memories: true, members: true } } } } },
  });
  const result = page("hubs", rows, limit, (last) => encodeCursor(secret, "hubs", ctx.user.id, last.hubId));
  return {
    ...result,
    hubs: result.hubs.map(({ hub: { _count, ...hub }, role }) => ({
      hub: serializeHub(hub),
      role,
      memory_count: _count.memories,
      member_count: _count.members,
    })),
  };
}
