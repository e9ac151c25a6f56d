import type { Database } from "@/lib/db/database.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";

/**
 * How long a mail's outbox row is kept: long past any invite it carries (7 days), so a hub's
 * mail list still shows what went out and why a delivery failed, but not for good.
 */
export const MAIL_RETENTION_MS = 90 * 24 * 60 * 60_000;
/** Rows deleted per statement: a prune never holds locks for long. */
const PRUNE_BATCH = 1000;
const PRUNE_EVERY_MS = 60 * 60_000;

/** Deletes outbox rows past retention in bounded batches (at most `maxBatches` statements). Returns rows deleted. */
export async function pruneMailOutbox(database: Database, now = new Date(), maxBatches = 20, batch = PRUNE_BATCH): Promise<number> {
  const cutoff = new Date(now.getTime() - MAIL_RETENTION_MS);
  return deleteInBatches(
    (take) => database.prisma.mailOutbox.findMany({ where: { createdAt: { lt: cutoff } }, select: { id: true }, orderBy: { createdAt: "asc" }, take }),
    (ids) => database.prisma.mailOutbox.deleteMany({ where: { id: { in: ids } } }),
    batch,
    maxBatches,
  );
}

/** Prunes the mail outbox every hour for the life of the process. */
export function startMailOutboxPrune(database: Database): void {
  runPeriodically("mail: outbox prune", PRUNE_EVERY_MS, () => pruneMailOutbox(database));
}
