import type { Database } from "@/lib/db/database.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";

/**
 * How long a revoked key's row is kept: long enough that its holder is told "revoked" rather than
 * "invalid" for a while. The 100-key cap counts only keys not revoked, so without this a user
 * creating and revoking keys in a loop would add rows for good.
 */
export const REVOKED_KEY_RETENTION_MS = 30 * 24 * 60 * 60_000;
/** Rows deleted per statement: a prune never holds locks for long. */
const PRUNE_BATCH = 1000;
const PRUNE_EVERY_MS = 60 * 60_000;

/** Deletes keys revoked longer ago than the retention, in bounded batches. Returns rows deleted. */
export async function pruneRevokedApiKeys(database: Database, now = new Date(), maxBatches = 20): Promise<number> {
  const cutoff = new Date(now.getTime() - REVOKED_KEY_RETENTION_MS);
  return deleteInBatches(
    (take) => database.prisma.apiKey.findMany({ where: { revokedAt: { lt: cutoff } }, select: { id: true }, take }),
    (ids) => database.prisma.apiKey.deleteMany({ where: { id: { in: ids } } }),
    PRUNE_BATCH,
    maxBatches,
  );
}

/** Prunes long-revoked API keys every hour for the life of the process. */
export function startRevokedApiKeysPrune(database: Database): void {
  runPeriodically("auth: revoked api keys prune", PRUNE_EVERY_MS, () => pruneRevokedApiKeys(database));
}
