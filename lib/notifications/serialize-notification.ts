import type { Notification } from "@/lib/db/generated/client.ts";

/** Pending rows past their expiry read as expired (no sweep needed for correctness). */
export function effectiveStatus(row: Pick<Notification, "status" | "expiresAt">, now: Date): string {
  return row.status === "pending" && row.expiresAt && row.expiresAt <= now ? "expired" : row.status;
}

/** The wire shape of Memax's SDK `Notification` (audience "user": every Engram notification names its recipient). */
export function serializeNotification(row: Notification, now: Date) {
  return {
    id: row.id,
    audience: "user" as const,
    ...(row.hubId && { hub_id: row.hubId }),
    recipient_user_id: row.userId,
    kind: row.kind,
    status: effectiveStatus(row, now),
    ...(row.resolution && { resolution: row.resolution }),
    priority: row.priority,
    source_kind: row.sourceKind,
    ...(row.sourceId && { source_id: row.sourceId }),
    // Rows a dream produced name their run (Memax's `dream_run_id`).
    ...(typeof (row.payload as { dream_run_id?: unknown })?.dream_run_id === "string" && { dream_run_id: (row.payload as { dream_run_id: string }).dream_run_id }),
    payload: row.payload as Record<string, unknown>,
    created_at: row.createdAt.toISOString(),
    ...(row.expiresAt && { expires_at: row.expiresAt.toISOString() }),
    ...(row.resolvedAt && { resolved_at: row.resolvedAt.toISOString() }),
    ...(row.seenAt && { seen_at: row.seenAt.toISOString() }),
  };
}
