import type { Database } from "@/lib/db/database.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";

/**
 * How long a sign-in code's row is kept: the hour over which request-email-code.ts counts an
 * address's codes (every code has expired long before). Each request adds a row, for any address,
 * so without this the table grew for good.
 */
export const EMAIL_CODE_RETENTION_MS = 60 * 60_000;
/** Rows deleted per statement: a prune never holds locks for long. */
const PRUNE_BATCH = 1000;
const PRUNE_EVERY_MS = 10 * 60_000;

/** Deletes sign-in codes older than the retention, in bounded batches. Returns rows deleted. */
export async function pruneEmailSignInCodes(database: Database, now = new Date(), maxBatches = 50, batch = PRUNE_BATCH): Promise<number> {
  const cutoff = new Date(now.getTime() - EMAIL_CODE_RETENTION_MS);
  return deleteInBatches(
    (take) => database.prisma.emailSignInCode.findMany({ where: { createdAt: { lt: cutoff } }, select: { id: true }, take }),
    (ids) => database.prisma.emailSignInCode.deleteMany({ where: { id: { in: ids } } }),
    batch,
    maxBatches,
  );
}

/** Prunes old sign-in codes every ten minutes for the life of the process. */
export function startEmailSignInCodesPrune(database: Database): void {
  runPeriodically("auth: e-mail sign-in codes prune", PRUNE_EVERY_MS, () => pruneEmailSignInCodes(database));
}
