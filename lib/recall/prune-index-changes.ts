import type { Database, SqlRunner } from "@/lib/db/database.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";

/** How long the lexical index's change log keeps a row: a process idle for longer rebuilds its index. */
export const INDEX_CHANGES_RETENTION_MS = 60 * 60_000;
const PRUNE_EVERY_MS = 10 * 60_000;
/** Rows deleted per statement: a prune never holds locks for long. */
const PRUNE_BATCH = 2000;

/**
 * Deletes change-log rows (recall_index_changes) older than `retentionMs` whose transactions have
 * all finished, in bounded batches, and raises the horizon to the newest xid deleted: a process
 * whose last catch-up is not past it may have missed a deleted row and rebuilds (lexical-index.ts).
 * Returns the rows deleted.
 */
export async function pruneIndexChanges(sql: SqlRunner, retentionMs = INDEX_CHANGES_RETENTION_MS, maxBatches = 50): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const [row] = await sql.query<{ deleted: number }>(
      `WITH gone AS (
         DELETE FROM recall_index_changes
         WHERE id IN (SELECT c.id FROM recall_index_changes c
                      WHERE c.at < clock_timestamp() - make_interval(secs => $1::float8)
                        AND c.xid < pg_snapshot_xmin(pg_current_snapshot())
                      ORDER BY c.id LIMIT $2::int)
         RETURNING xid
       ), newest AS (
         SELECT xid FROM gone ORDER BY xid DESC LIMIT 1
       ), raised AS (
         UPDATE recall_index_horizon h SET xid = newest.xid FROM newest WHERE h.id = 1 AND h.xid < newest.xid RETURNING 1
       )
       SELECT (SELECT count(*) FROM gone)::int AS deleted, (SELECT count(*) FROM raised)::int AS raised`,
      [retentionMs / 1000, PRUNE_BATCH],
    );
    const deleted = Number(row?.deleted ?? 0);
    total += deleted;
    if (deleted < PRUNE_BATCH) break;
  }
  return total;
}

/** Prunes the index change log every 10 minutes for the life of the process. */
export function startIndexChangesPrune(database: Database): void {
  runPeriodically("recall: index change-log prune", PRUNE_EVERY_MS, () => pruneIndexChanges(database.sql));
}
