import type { Database } from "@/lib/db/database.ts";
import { lockConfigKey } from "./upsert-config.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";

/** Deletion records read per batch; each is removed in a short transaction of its own. */
const PRUNE_BATCH = 200;
const PRUNE_EVERY_MS = 10 * 60_000;

/**
 * Removes deletion records past their retention (content no longer restorable), with their kept
 * versions and device states, in bounded batches (at most `maxBatches`). Without this every file an
 * account ever deleted stayed for good — up to 50 versions of 512 KiB each — and every sync read it.
 * A device that has not synced since a record went is told `local_only` for its copy, as for any file
 * the cloud does not know. Returns the records removed.
 */
export async function pruneConfigDeletions(database: Database, now = new Date(), maxBatches = 10): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const expired = await database.prisma.agentConfig.findMany({
      where: { deletedAt: { not: null }, contentExpiresAt: { lte: now } },
      select: { id: true, ownerId: true, agent: true, filePath: true, scope: true },
      orderBy: { contentExpiresAt: "asc" },
      take: PRUNE_BATCH,
    });
    for (const row of expired) {
      // Under the key's lock and re-checked there: a push that brings the file back in the meantime keeps it.
      const { count } = await database.prisma.$transaction(async (tx) => {
        await lockConfigKey(tx, row.ownerId, row.agent, row.filePath, row.scope);
        const deleted = await tx.agentConfig.deleteMany({ where: { id: row.id, deletedAt: { not: null }, contentExpiresAt: { lte: now } } });
        // A persona is a config: a default naming this one would name nothing for good (a file synced
        // again is a new config). The config row first, then the settings row, as the account-data
        // deletion and PATCH /v1/settings take them.
        if (deleted.count > 0) await tx.userSetting.updateMany({ where: { userId: row.ownerId, chatDefaultPersonaId: row.id }, data: { chatDefaultPersonaId: "" } });
        return deleted;
      });
      total += count;
    }
    if (expired.length < PRUNE_BATCH) break;
  }
  return total;
}

/** Prunes expired config deletion records every 10 minutes for the life of the process. */
export function startConfigDeletionsPrune(database: Database): void {
  runPeriodically("configs: deletion record prune", PRUNE_EVERY_MS, () => pruneConfigDeletions(database));
}
