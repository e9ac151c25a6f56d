import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { storageUsage } from "@/lib/quotas/storage-usage.ts";
import { storedConfigBytes } from "@/lib/configs/upsert-config.ts";
import { periodCounts } from "./count-usage.ts";
import { planLimits, SELF_HOSTED_PLAN, SELF_HOSTED_PLAN_NAME } from "./plan-limits.ts";
import type { UsageObject } from "./usage-object.ts";

/**
 * GET /v1/usage — this month's (UTC) calls, what the caller stores, and the
 * limits this server enforces. The flat counters match Memax's `Usage`; the
 * rest its `UsageWithLimits`.
 */
export async function getUsage(ctx: AuthContext): Promise<UsageObject> {
  // The counters and stored bytes are the whole account's, across every hub: a key limited to some
  // hubs (a team bot's) must not read them, as it cannot read the account's settings.
  if (ctx.credential.hubIds !== null) {
    throw new ApiError("forbidden", "This API key is limited to some hubs; account-wide usage needs a key for the whole account");
  }
  // Bytes stored: memory text plus the attachments of the memories this person owns in the hubs they
  // are a member of (not in one they left or were removed from, nor in a deleted one being purged), both
  // in the trigger-kept counter the storage quota checks, so the figure and the limit it is held to agree.
  const [counts, owned, configBytes] = await Promise.all([periodCounts(ctx), storageUsage(ctx.db, "user", ctx.user.id), storedConfigBytes(ctx.db, ctx.user.id)]);
  return {
    ...counts,
    memory_count: owned.memories,
    storage_bytes: owned.bytes,
    config_bytes: configBytes,
    plan: SELF_HOSTED_PLAN,
    plan_display_name: SELF_HOSTED_PLAN_NAME,
    limits: { plan_id: SELF_HOSTED_PLAN, plan_display_name: SELF_HOSTED_PLAN_NAME, ...planLimits("user") },
  };
}
