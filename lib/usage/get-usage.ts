import type { AuthContext } from "@/lib/api/context.ts";
import { storageUsage } from "@/lib/quotas/storage-usage.ts";
import { periodCounts } from "./count-usage.ts";
import { planLimits, SELF_HOSTED_PLAN, SELF_HOSTED_PLAN_NAME } from "./plan-limits.ts";
import type { UsageObject } from "./usage-object.ts";

/**
 * GET /v1/usage — this month's (UTC) calls, what the caller stores, and the
 * limits this server enforces. The flat counters match Memax's `Usage`; the
 * rest its `UsageWithLimits`.
 */
export async function getUsage(ctx: AuthContext): Promise<UsageObject> {
  // Bytes stored: memory text (the trigger-kept counters) plus the attachments of the memories this person pushed.
  const [counts, owned, files] = await Promise.all([
    periodCounts(ctx),
    storageUsage(ctx.db, "user", ctx.user.id),
    ctx.db.attachment.aggregate({ where: { memory: { ownerId: ctx.user.id } }, _sum: { sizeBytes: true } }),
  ]);
  const storageBytes = owned.bytes + (files._sum.sizeBytes ?? 0);
  return {
    ...counts,
    memory_count: owned.memories,
    storage_bytes: storageBytes,
    plan: SELF_HOSTED_PLAN,
    plan_display_name: SELF_HOSTED_PLAN_NAME,
    limits: { plan_id: SELF_HOSTED_PLAN, plan_display_name: SELF_HOSTED_PLAN_NAME, ...planLimits("user") },
  };
}
