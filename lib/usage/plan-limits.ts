import { config } from "@/lib/config.ts";
import { MAX_HUBS_PER_USER, maxHubMembers } from "@/lib/hubs/hub-fields.ts";
import { MAX_ACTIVE_INVITES } from "@/lib/invites/invite-fields.ts";
import { MAX_CONTENT_BYTES } from "@/lib/memories/memory-fields.ts";
import { configBytesLimit, quotaLimits } from "@/lib/quotas/quota-limits.ts";
import { MAX_TOPICS_PER_HUB } from "@/lib/topics/topic-fields.ts";
import { maxUploadBytes } from "@/lib/uploads/upload-limits.ts";

/** -1 means unlimited (Memax's convention): a self-hosted install has no plan caps. */
export const UNLIMITED = -1;

/** Every user of a self-hosted install is on this one plan (Memax's plan ids). */
export const SELF_HOSTED_PLAN = "self_hosted";
export const SELF_HOSTED_PLAN_NAME = "Self-hosted";

/**
 * The limits this install enforces (lib/quotas, the rate limiter, the fixed caps), for a person
 * ("user") or a team hub ("hub"): one source for GET /v1/usage and GET /v1/plans. -1 only where
 * there is no limit at all.
 */
export function planLimits(scope: "user" | "hub") {
  const { rateLimits } = config();
  const quota = quotaLimits()[scope];
  return {
    memory_limit: quota.memories ?? UNLIMITED,
    push_limit: UNLIMITED,
    recall_limit: UNLIMITED,
    ask_limit: UNLIMITED,
    ask_model: process.env.ENGRAM_CHAT_MODEL && process.env.OPENAI_API_KEY ? process.env.ENGRAM_CHAT_MODEL : "extractive",
    dreams_enabled: true,
    review_inbox: true,
    // Every hub a user belongs to counts, the personal one included.
    max_team_hubs: MAX_HUBS_PER_USER - 1,
    max_hub_members: scope === "hub" ? maxHubMembers() : UNLIMITED,
    storage_bytes_limit: quota.bytes ?? UNLIMITED,
    // Synced agent config files belong to a person, never to a team hub (whose plan leaves it out).
    config_bytes_limit: configBytesLimit() ?? UNLIMITED,
    max_attachment_bytes: maxUploadBytes(),
    max_memory_content_bytes: MAX_CONTENT_BYTES,
    max_active_invites_per_hub: MAX_ACTIVE_INVITES,
    max_topics_per_hub: MAX_TOPICS_PER_HUB,
    rate_limit_rpm: rateLimits.regular,
    rate_limit_heavy_rpm: rateLimits.heavy,
    rate_limit_light_rpm: rateLimits.light,
  };
}
