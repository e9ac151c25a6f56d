import type { AuthContext } from "@/lib/api/context.ts";
import { membershipOrThrow } from "./hub-access.ts";
import { memberViewer } from "./member-viewer.ts";
import { hubCounts } from "./hub-counts.ts";
import { DETAIL_MEMBERS_LIMIT } from "./hub-fields.ts";
import { memberUserSelect, serializeHub, serializeMember, serializeTransfer } from "./serialize-hub.ts";

/** Hub detail: settings, the caller's role, the first members, counts and the pending transfer. */
export async function getHub(ctx: AuthContext, hubId: string) {
  const membership = await membershipOrThrow(ctx, hubId);
  const { hub, role } = membership;
  const now = ctx.now();
  const [members, counts, pending] = await Promise.all([
    ctx.db.hubMember.findMany({
      where: { hubId: hub.id },
      orderBy: [{ joinedAt: "asc" }, { userId: "asc" }],
      take: DETAIL_MEMBERS_LIMIT,
      include: { user: memberUserSelect },
    }),
    hubCounts(ctx.db, hub.id, now),
    ctx.db.ownershipTransfer.findFirst({ where: { hubId: hub.id, state: "pending", expiresAt: { gt: now } } }),
  ]);
  const viewer = memberViewer(ctx.user.id, membership);
  return {
    hub: serializeHub(hub),
    role,
    members: members.map((member) => serializeMember(member, viewer)),
    members_has_more: counts.members > members.length,
    counts,
    pending_transfer: pending ? serializeTransfer(pending, now) : null,
  };
}
