import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { CHECKLIST_KIND, DIGEST_KIND, type ChecklistPayload } from "@/lib/onboarding/onboarding-items.ts";
import { checklistComplete, completeItems, pendingLocks } from "./checklist.ts";
import { ownNotificationOrThrow } from "./update-notification.ts";

/** Memax's NotificationItemUpdateResult. */
export interface NotificationItemUpdateResult {
  item_id: string;
  viewed_at?: string;
  completed_at?: string;
  progress?: { current: number; target: number };
  auto_resolved?: boolean;
  auto_resolved_as?: "applied_auto";
}

/**
 * POST /v1/notifications/{id}/items/{item_id}/view and /complete: a sub-item of a `checklist` (both)
 * or a `digest` (view only) is seen, or done. Idempotent: the first stamp stays. Completing waits
 * for the item's locked_by items (400 item_locked), and the last required item of a pending
 * checklist resolves it (applied_auto). Under a per-notification lock, so two ticks at once
 * cannot lose one another.
 */
export async function updateNotificationItem(ctx: AuthContext, id: string, itemId: string, op: "view" | "complete"): Promise<NotificationItemUpdateResult> {
  const row = await ownNotificationOrThrow(ctx, id);
  const kinds = op === "view" ? [CHECKLIST_KIND, DIGEST_KIND] : [CHECKLIST_KIND];
  if (!kinds.includes(row.kind)) {
    throw new ApiError("kind_not_supported", `A ${row.kind} notification has no items to ${op === "view" ? "view" : "complete"}`, { kinds });
  }
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, `notification:${row.id}`);
    const current = await tx.notification.findUniqueOrThrow({ where: { id: row.id } });
    const payload = current.payload as unknown as ChecklistPayload;
    const item = Array.isArray(payload.items) ? payload.items.find((i) => i.id === itemId) : undefined;
    if (!item) throw new ApiError("not_found", "No such item in this notification");
    let autoResolved = false;
    if (op === "view") {
      if (item.viewed_at) return result(item);
      item.viewed_at = now.toISOString();
    } else {
      if (item.completed_at) return result(item);
      const locks = pendingLocks(payload, item);
      if (locks.length) throw new ApiError("item_locked", `Finish ${locks.join(", ")} first`, { locked_by: locks });
      completeItems(payload, [item.id], now);
      autoResolved = current.status === "pending" && checklistComplete(payload);
    }
    await tx.notification.update({
      where: { id: row.id },
      data: { payload: payload as object, ...(autoResolved && { status: "resolved", resolution: "applied_auto", resolvedAt: now }) },
    });
    return { ...result(item), ...(autoResolved && { auto_resolved: true, auto_resolved_as: "applied_auto" as const }) };
  });
}

function result(item: ChecklistPayload["items"][number]): NotificationItemUpdateResult {
  return {
    item_id: item.id,
    ...(item.viewed_at && { viewed_at: item.viewed_at }),
    ...(item.completed_at && { completed_at: item.completed_at }),
    ...(item.progress && { progress: item.progress }),
  };
}
