import type { AuthContext } from "@/lib/api/context.ts";
import { isRole } from "@/lib/api/permissions.ts";
import { memoryCounts } from "@/lib/quotas/memory-counts.ts";
import { effectiveRole, membershipWhere } from "./hub-access.ts";
import { MAX_HUBS_PER_USER } from "./hub-fields.ts";
import { serializeHub } from "./serialize-hub.ts";

/**
 * Every hub the caller belongs to (and the credential reaches), oldest first
 * (ids are time-ordered), with role and counts, as one array: the Memax
 * clients iterate it whole. Bounded by MAX_HUBS_PER_USER, which creating,
 * joining and adding enforce.
 */
export async function listHubs(ctx: AuthContext) {
  const rows = await ctx.db.hubMember.findMany({
    // The resolver's filter: a key limited to some hubs lists only those.
    where: membershipWhere(ctx),
    orderBy: { hubId: "asc" },
    // The cap is enforced on every way in; `take` only guards against rows from before it existed.
    take: MAX_HUBS_PER_USER,
    include: { hub: { include: { _count: { select: { members: true } } } } },
  });
  const memories = await memoryCounts(ctx.sql, "hub", rows.map((row) => row.hubId));
  return rows.map(({ hub: { _count, ...hub }, role }) => ({
    hub: serializeHub(hub),
    // The role this credential acts with (a read-only key is a viewer), as hub detail and summary say.
    role: isRole(role) ? effectiveRole(ctx.credential, role) : role,
    memory_count: memories.get(hub.id) ?? 0,
    member_count: _count.members,
  }));
}
