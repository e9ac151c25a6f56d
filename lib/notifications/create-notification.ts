import type { DbClient } from "@/lib/db/database.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { newId } from "@/lib/ids.ts";
import type { NotificationKind } from "./notification-kinds.ts";

export interface CreateNotificationInput {
  /** The recipient. */
  userId: string;
  hubId?: string | null;
  kind: NotificationKind;
  /** What produced it ("invite", "transfer", "memory", "dream_run"…) and its id: lets /resolve act on it. */
  sourceKind: string;
  sourceId?: string | null;
  payload?: Record<string, unknown>;
  priority?: number;
  expiresAt?: Date | null;
  /** Who caused it (the event's actor). */
  actorId?: string | null;
  now?: Date;
}

/**
 * Records one notification for one user inside the caller's transaction and
 * emits `notification.created` to that user alone. Call it last in the
 * transaction (the event holds a lock until commit).
 */
export async function createNotification(tx: DbClient, input: CreateNotificationInput): Promise<{ id: string }> {
  const id = newId();
  await tx.notification.create({
    data: {
      id,
      userId: input.userId,
      hubId: input.hubId ?? null,
      kind: input.kind,
      sourceKind: input.sourceKind,
      sourceId: input.sourceId ?? null,
      payload: (input.payload ?? {}) as object,
      priority: input.priority ?? 0,
      expiresAt: input.expiresAt ?? null,
      ...(input.now && { createdAt: input.now }),
    },
  });
  await emitEvent(tx, { type: "notification.created", hubId: input.hubId ?? null, actorId: input.actorId ?? null, entityId: id, userIds: [input.userId] });
  return { id };
}
