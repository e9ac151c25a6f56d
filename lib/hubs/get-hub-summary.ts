import type { AuthContext } from "@/lib/api/context.ts";
import { unassignedCount } from "@/lib/topics/topic-memory-counts.ts";
import { membershipOrThrow } from "./hub-access.ts";
import { hubCounts } from "./hub-counts.ts";
import { hubHeader } from "./hub-header.ts";
import { serializeHub } from "./serialize-hub.ts";

const MEMBERS_PREVIEW = 5;

/**
 * The light view for headers and switchers: the hub, the caller's role, the
 * Memax SDK's `stats` and `header`, and Engram's `hub_id`, `name`, `counts`.
 * `inbox` is memories without a topic; Engram has no review queue, so
 * `pending_review` is always 0.
 */
export async function getHubSummary(ctx: AuthContext, hubId: string, options: { timeZone?: string } = {}) {
  const { hub, role } = await membershipOrThrow(ctx, hubId);
  const now = ctx.now();
  const membership = await ctx.db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId: ctx.user.id } }, select: { lastVisitedAt: true } });
  const lastVisitedAt = membership?.lastVisitedAt ?? null;
  const [counts, inbox, teamActivity, preview] = await Promise.all([
    hubCounts(ctx.db, hub.id, now),
    // Memories under a topic being deleted show no topic, so they count here too (as in GET /v1/topics).
    unassignedCount(ctx.sql, hub.id),
    hub.hubType === "team"
      ? ctx.db.memory.count({ where: { hubId: hub.id, ownerId: { not: ctx.user.id }, ...(lastVisitedAt && { createdAt: { gt: lastVisitedAt } }) } })
      : Promise.resolve(0),
    ctx.db.hubMember.findMany({
      where: { hubId: hub.id },
      orderBy: [{ joinedAt: "asc" }, { userId: "asc" }],
      take: MEMBERS_PREVIEW,
      select: { userId: true, user: { select: { name: true, image: true } } },
    }),
  ]);
  return {
    hub: serializeHub(hub),
    role,
    stats: { memories: counts.memories, topics: counts.topics, inbox, pending_review: 0, members: counts.members, team_activity: teamActivity },
    members_preview: preview.map((m) => ({ user_id: m.userId, user_name: m.user.name, user_avatar_url: m.user.image ?? "" })),
    header: hubHeader({ memories: counts.memories, inbox, hubType: hub.hubType, lastVisitedAt, teamActivity, userName: ctx.user.name, now, timeZone: options.timeZone }),
    hub_id: hub.id,
    name: hub.name,
    counts,
  };
}
