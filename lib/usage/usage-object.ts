import { z } from "zod";

/** GET /v1/usage (Memax's `Usage` and `UsageWithLimits`); getUsage is typed by it. -1 means unlimited. */
export const usageObjectSchema = z
  .object({
    user_id: z.string(),
    period_start: z.string(),
    period_end: z.string(),
    push_count: z.int(),
    recall_count: z.int(),
    ask_count: z.int(),
    memory_count: z.int(),
    storage_bytes: z.number(),
    /** Synced agent config files: every kept version, deleted files too while restorable (held to limits.config_bytes_limit). */
    config_bytes: z.number(),
    plan: z.string(),
    plan_display_name: z.string(),
    limits: z.object({
      plan_id: z.string(),
      plan_display_name: z.string(),
      memory_limit: z.int(),
      push_limit: z.int(),
      recall_limit: z.int(),
      ask_limit: z.int(),
      ask_model: z.string(),
      dreams_enabled: z.boolean(),
      review_inbox: z.boolean(),
      max_team_hubs: z.int(),
      max_hub_members: z.int(),
      storage_bytes_limit: z.int(),
      config_bytes_limit: z.int(),
      max_attachment_bytes: z.int(),
      max_memory_content_bytes: z.int(),
      max_active_invites_per_hub: z.int(),
      max_topics_per_hub: z.int(),
      rate_limit_rpm: z.int(),
      rate_limit_heavy_rpm: z.int(),
      rate_limit_light_rpm: z.int(),
    }),
  })
  .meta({ id: "Usage" });
export type UsageObject = z.output<typeof usageObjectSchema>;
