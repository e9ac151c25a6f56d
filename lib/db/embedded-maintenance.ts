import { positiveIntEnv } from "@/lib/config.ts";
import type { Database, SqlRunner } from "./database.ts";

/**
 * The tables that churn: memories (processing state, access counts), chunks
 * (replaced on every re-processing) and the per-hub BM25 statistics (updated
 * by every chunk write).
 */
const TABLES = ["memories", "chunks", "recall_term_stats", "recall_hub_stats"] as const;
/** Vacuum a table once this many of its rows changed or died since its last vacuum… */
const MIN_CHANGED_ROWS = 500;
/** …and they are at least this share of its live rows (autovacuum's scale factor). */
const CHANGED_SHARE = 0.1;

interface TableActivity {
  relname: string;
  changed: number;
  live: number;
}

const globalForMaintenance = globalThis as unknown as { __engramMaintenance?: NodeJS.Timeout };

/**
 * What autovacuum does on a PostgreSQL server, for the embedded database,
 * which has none: every ENGRAM_MAINTENANCE_MINUTES (default 10), VACUUM
 * (ANALYZE) the busy tables that changed enough. Without it dead row versions
 * pile up (every access-count and status update leaves one) and the planner's
 * statistics go stale. No-op on PostgreSQL (`DATABASE_URL`).
 */
export function startEmbeddedMaintenance(database: Database): void {
  if (database.kind !== "pglite" || globalForMaintenance.__engramMaintenance) return;
  const everyMs = positiveIntEnv("ENGRAM_MAINTENANCE_MINUTES", 10) * 60_000;
  const timer = setInterval(
    () => void maintainEmbeddedDatabase(database.sql).catch((error) => console.error("[engram] database maintenance failed", error)),
    everyMs,
  );
  timer.unref();
  globalForMaintenance.__engramMaintenance = timer;
}

/** One maintenance pass; returns the tables it vacuumed. */
export async function maintainEmbeddedDatabase(sql: SqlRunner): Promise<string[]> {
  // Row counters reach the statistics views at most once a second; read them current.
  await sql.exec(`SELECT pg_stat_force_next_flush()`);
  const rows = await sql.query<TableActivity>(
    `SELECT relname, (n_dead_tup + n_mod_since_analyze)::int AS changed, n_live_tup::int AS live
     FROM pg_stat_user_tables WHERE relname = ANY($1::text[])`,
    [[...TABLES]],
  );
  const due = rows.filter((row) => row.changed >= MIN_CHANGED_ROWS && row.changed >= CHANGED_SHARE * row.live).map((row) => row.relname);
  for (const table of due) await sql.exec(`VACUUM (ANALYZE) "${table}"`);
  if (due.length > 0) await sql.exec(`SELECT pg_stat_force_next_flush()`);
  return due;
}
