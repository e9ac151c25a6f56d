import type { DbClient } from "./database.ts";

/**
 * Serialises transactions that race on the same logical key (e.g. two pushes
 * of the same content into one hub). Held until the transaction ends.
 */
export async function lockForTransaction(tx: DbClient, key: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`;
}
