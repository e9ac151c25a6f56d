import type { Database } from "@/lib/db/database.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { CHECKLIST_KIND, ONBOARDING_SOURCE } from "@/lib/onboarding/onboarding-items.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";

/**
 * How long a notification is kept once it is no longer pending (resolved, dismissed or expired; a
 * pending one past its expiry counts from that expiry): for that long it is in the bell's history
 * (`?status=resolved|dismissed|expired`). Dead invites are kept as long, so an invite that can still
 * be regenerated still has the row regenerating revives. Without this every row ever written stayed.
 */
export const NOTIFICATION_RETENTION_MS = 30 * 24 * 60 * 60_000;
/** Rows deleted per statement: a prune never holds locks for long. */
const PRUNE_BATCH = 1000;
const PRUNE_EVERY_MS = 60 * 60_000;

/** Past retention, in Prisma's terms: checked again by the delete, as a row reopened since the read (an undone review) stays. */
function pastRetention(cutoff: Date): Prisma.NotificationWhereInput {
  return {
    OR: [
      { status: { not: "pending" }, resolvedAt: { lt: cutoff } },
      { status: { not: "pending" }, resolvedAt: null, createdAt: { lt: cutoff } },
      { status: "pending", expiresAt: { lt: cutoff } },
    ],
  };
}

const version = (alias: string) => `COALESCE(substring(${alias}.source_id from '^v([0-9]{1,9})$')::int, 0)`;

/**
 * A batch of ids past retention ($1 the cutoff, $2/$3 the checklist's kind and source kind, $4 the
 * batch size). Each side of the OR has a partial index of its own (notifications_prune_*_idx): the
 * prune reads what it deletes, not the whole table.
 */
export const PRUNABLE_NOTIFICATIONS_SQL = `SELECT n.id FROM notifications n
  WHERE ((n.status <> 'pending' AND COALESCE(n.resolved_at, n.created_at) < $1::timestamptz)
         OR (n.status = 'pending' AND n.expires_at < $1::timestamptz))
    AND NOT (n.kind = $2 AND n.source_kind = $3 AND NOT EXISTS (
          SELECT 1 FROM notifications newer
          WHERE newer.user_id = n.user_id AND newer.kind = n.kind AND newer.source_kind = n.source_kind
            AND ${version("newer")} > ${version("n")}))
  LIMIT $4::int`;

/**
 * Deletes notifications past retention, in bounded batches. A person's latest getting-started
 * checklist stays whatever its age: GET /v1/onboarding/state reports it, and restarts number the
 * next version after it. Returns rows deleted.
 */
export async function pruneNotifications(database: Database, now = new Date(), maxBatches = 20): Promise<number> {
  const cutoff = new Date(now.getTime() - NOTIFICATION_RETENTION_MS);
  return deleteInBatches(
    (take) => database.sql.query<{ id: string }>(PRUNABLE_NOTIFICATIONS_SQL, [cutoff.toISOString(), CHECKLIST_KIND, ONBOARDING_SOURCE, take]),
    (ids) => database.prisma.notification.deleteMany({ where: { id: { in: ids }, ...pastRetention(cutoff) } }),
    PRUNE_BATCH,
    maxBatches,
  );
}

/** Prunes old notifications every hour for the life of the process. */
export function startNotificationsPrune(database: Database): void {
  runPeriodically("notifications: prune", PRUNE_EVERY_MS, () => pruneNotifications(database));
}
