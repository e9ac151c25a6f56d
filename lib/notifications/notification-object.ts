import { z } from "zod";

/** The wire shape of a notification (Memax's SDK `Notification`); serializeNotification is typed by it. */
export const notificationObjectSchema = z
  .object({
    id: z.string(),
    audience: z.literal("user"),
    hub_id: z.string().optional(),
    recipient_user_id: z.string(),
    kind: z.string(),
    status: z.string().meta({ description: "pending, resolved, dismissed or expired" }),
    resolution: z.string().optional(),
    priority: z.int(),
    source_kind: z.string(),
    source_id: z.string().optional(),
    payload: z.record(z.string(), z.unknown()),
    created_at: z.string(),
    expires_at: z.string().optional(),
    resolved_at: z.string().optional(),
    seen_at: z.string().optional(),
  })
  .meta({ id: "Notification" });
export type NotificationObject = z.output<typeof notificationObjectSchema>;

/** GET /v1/notifications/summary: badge counts by kind. */
export const notificationSummarySchema = z
  .object({
    needs_action_pending: z.int(),
    needs_action_unseen: z.int(),
    updates_pending: z.int(),
    updates_unseen: z.int(),
    unseen_total: z.int(),
    by_kind: z.record(z.string(), z.object({ pending: z.int(), unseen: z.int() })),
  })
  .meta({ id: "NotificationSummary" });
export type NotificationSummary = z.output<typeof notificationSummarySchema>;
