import type { AuthContext } from "@/lib/api/context.ts";
import { config, positiveIntEnv } from "@/lib/config.ts";
import { MAX_HUBS_PER_USER } from "@/lib/hubs/hub-fields.ts";
import { MAX_ACTIVE_INVITES } from "@/lib/invites/invite-fields.ts";
import { MAX_CONTENT_BYTES } from "@/lib/memories/memory-fields.ts";
import { quotaLimits } from "@/lib/quotas/quota-limits.ts";
import { storageUsage } from "@/lib/quotas/storage-usage.ts";
import { MAX_TOPICS_PER_HUB } from "@/lib/topics/topic-fields.ts";
import { periodCounts } from "./count-usage.ts";
import type { UsageObject } from "./usage-object.ts";

/** -1 means unlimited (Memax's convention): a self-hosted install has no plan caps. */
const UNLIMITED = -1;
const DEFAULT_UPLOAD_MAX_BYTES = 25 * 1024 * 1024;

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
  const { rateLimits } = config();
  // The limits this install enforces on the caller (lib/quotas); -1 only where there is none.
  const quota = quotaLimits().user;
  const storageBytes = owned.bytes + (files._sum.sizeBytes ?? 0);
  return {
    ...counts,
    memory_count: owned.memories,
    storage_bytes: storageBytes,
    plan: "self_hosted",
    plan_display_name: "Self-hosted",
    limits: {
      plan_id: "self_hosted",
      plan_display_name: "Self-hosted",
      memory_limit: quota.memories ?? UNLIMITED,
      push_limit: UNLIMITED,
      recall_limit: UNLIMITED,
      ask_limit: UNLIMITED,
      ask_model: process.env.ENGRAM_CHAT_MODEL && process.env.OPENAI_API_KEY ? process.env.ENGRAM_CHAT_MODEL : "extractive",
      dreams_enabled: true,
      review_inbox: true,
      // Every hub a user belongs to counts, the personal one included.
      max_team_hubs: MAX_HUBS_PER_USER - 1,
      max_hub_members: UNLIMITED,
      storage_bytes_limit: quota.bytes ?? UNLIMITED,
      max_attachment_bytes: positiveIntEnv("ENGRAM_UPLOAD_MAX_BYTES", DEFAULT_UPLOAD_MAX_BYTES),
      max_memory_content_bytes: MAX_CONTENT_BYTES,
      max_active_invites_per_hub: MAX_ACTIVE_INVITES,
      max_topics_per_hub: MAX_TOPICS_PER_HUB,
      rate_limit_rpm: rateLimits.regular,
      rate_limit_heavy_rpm: rateLimits.heavy,
      rate_limit_light_rpm: rateLimits.light,
    },
  };
}
