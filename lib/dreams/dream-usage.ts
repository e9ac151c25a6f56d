import { z } from "zod";
import { normalizeId } from "@/lib/ids.ts";
import type { AuthContext } from "@/lib/api/context.ts";
import { allows, targetHubOrThrow } from "@/lib/hubs/hub-access.ts";
import { periodEnd, periodStart } from "@/lib/usage/count-usage.ts";

export const dreamUsageQuerySchema = z.object({ hub_id: z.string().max(200).overwrite(normalizeId).optional() });

/**
 * GET /v1/usage/dreams — Memax's `DreamUsage` for one hub (`hub_id`, else
 * X-Hub-ID, else the personal hub, or a hub-limited key's first hub): a
 * self-hosted server has no dream quota, so `limit` is -1 (unlimited,
 * `remaining` omitted), `used` counts this month's runs of the hub (scheduled
 * and on demand), and `allowed` says whether this caller may trigger one now
 * (the roles table's `dreams.trigger`, a writing credential).
 */
export async function getDreamUsage(ctx: AuthContext, input: { hub_id?: string }) {
  const membership = await targetHubOrThrow(ctx, input.hub_id || ctx.hubHeader, "memories.read");
  const now = ctx.now();
  const start = periodStart(now);
  const end = periodEnd(now);
  const used = await ctx.db.dreamRun.count({ where: { hubId: membership.hub.id, createdAt: { gte: start, lt: end } } });
  const personal = membership.hub.hubType === "personal";
  return {
    scope: personal ? ("personal" as const) : ("hub" as const),
    ...(!personal && { hub_id: membership.hub.id }),
    tier: "lucid" as const,
    mode: "soft" as const,
    limit: -1,
    used,
    allowed: allows(membership, "dreams.trigger"),
    period_start: start.toISOString(),
    period_end: end.toISOString(),
    quota_source: "self_hosted",
  };
}
