import type { DbClient } from "./database.ts";

/**
 * Serialises transactions that race on the same logical key (e.g. two pushes
 * of the same content into one hub). Held until the transaction ends.
 */
export async function lockForTransaction(tx: DbClient, key: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`;
}

/**
 * The shared side of a key: any number of holders at once, all excluded by one
 * lockForTransaction of the same key. A waiting exclusive request queues ahead of
 * later shared ones, so a stream of shared holders cannot starve it (a row's FOR
 * SHARE lock gives no such guarantee).
 */
export async function lockForTransactionShared(tx: DbClient, key: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock_shared(hashtextextended(${key}, 0))`;
}
