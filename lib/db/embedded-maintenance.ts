import { positiveIntEnv } from "@/lib/config.ts";
import { onMemoryWrite } from "@/lib/processing/after-memory-write.ts";
import { runAsBackground } from "./background-work.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";
import type { Database, SqlRunner } from "./database.ts";

/**
 * Every table is watched, as autovacuum watches every table: besides memories and chunks, events and
 * the mail outbox are pruned, chat messages are rewritten on every streamed event, counters on every
 * write. A table left out never gets its deleted rows' space back (the file only grows) nor statistics.
 */
const tableActivity = (sql: SqlRunner, changed: "n_mod_since_analyze" | "(n_dead_tup + n_mod_since_analyze)") =>
  sql.query<TableActivity>(`SELECT schemaname AS schema, relname, ${changed}::int AS changed, n_live_tup::int AS live FROM pg_stat_user_tables`);
const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;
/** Vacuum a table once this many of its rows changed or died since its last vacuum… */
const MIN_CHANGED_ROWS = 500;
/** …and they are at least this share of its live rows (autovacuum's scale factor). */
const CHANGED_SHARE = 0.1;

interface TableActivity {
  schema: string;
  relname: string;
  changed: number;
  live: number;
}

/** Analyse a table once this many rows changed since its last analysis… (autovacuum_analyze_threshold) */
const ANALYZE_MIN_CHANGED = 50;
/** …plus this share of its live rows (autovacuum_analyze_scale_factor). */
const ANALYZE_SHARE = 0.1;
/** Writes noted since the last check that make a check worth its ~1 ms. */
const WRITES_PER_CHECK = 50;
/** A check runs this long after the write that made it due, so a burst is analysed once. */
const CHECK_DELAY_MS = 500;
/** And every this often regardless, for writers that note nothing (batch SQL, moves, deletes). */
const CHECK_EVERY_MS = 15_000;

interface AnalyzeState {
  sql: SqlRunner;
  pending: number;
  scheduled?: NodeJS.Timeout;
  running?: Promise<string[]>;
  unsubscribe?: () => void;
}

const globalForMaintenance = globalThis as unknown as { __engramAnalyze?: AnalyzeState };

/**
 * What autovacuum does on a PostgreSQL server, for the embedded database,
 * which has none: every ENGRAM_MAINTENANCE_MINUTES (default 10), VACUUM
 * (ANALYZE) the tables that changed enough. Without it dead row versions
 * pile up (every access-count and status update leaves one) and the planner's
 * statistics go stale. No-op on PostgreSQL (`DATABASE_URL`). Both timers run as periodic tasks:
 * a pass still going at the next tick is not joined by a second one, and a graceful stop ends them
 * before the database closes (a pass left running then failed on the closed database).
 */
export function startEmbeddedMaintenance(database: Database): void {
  if (database.kind !== "pglite" || globalForMaintenance.__engramAnalyze) return;
  const everyMs = positiveIntEnv("ENGRAM_MAINTENANCE_MINUTES", 10) * 60_000;
  runPeriodically("database maintenance", everyMs, () => runAsBackground(() => maintainEmbeddedDatabase(database.sql)), { runAtStart: false });

  // Fresh planner statistics without waiting for the vacuum pass: the autoanalyze half of
  // autovacuum. Checked after bursts of writes (memories created, chunks stored) and every 15 s.
  const state: AnalyzeState = { sql: database.sql, pending: 0 };
  globalForMaintenance.__engramAnalyze = state;
  runPeriodically("database statistics check", CHECK_EVERY_MS, () => runAnalyzeCheck(), { runAtStart: false });
  // Removed on stop: kept, every start after a stop added one more, each counting every write again.
  state.unsubscribe = onMemoryWrite(() => noteTableWrites(1));
}

/**
 * Ends the statistics checks due after writes (a graceful stop; the timers end with the periodic
 * tasks) and resolves once a check in progress has finished, so none runs on a closed database.
 */
export async function stopEmbeddedMaintenance(): Promise<void> {
  const state = globalForMaintenance.__engramAnalyze;
  if (!state) return;
  globalForMaintenance.__engramAnalyze = undefined;
  state.unsubscribe?.();
  clearTimeout(state.scheduled);
  await state.running;
}

/**
 * Writers tell maintenance how many rows they wrote; once enough did, a statistics check runs
 * shortly after (no-op unless the embedded database's maintenance is running).
 */
export function noteTableWrites(rows: number): void {
  const state = globalForMaintenance.__engramAnalyze;
  if (!state) return;
  state.pending += rows;
  if (state.pending < WRITES_PER_CHECK || state.scheduled) return;
  state.scheduled = setTimeout(() => void runAnalyzeCheck(), CHECK_DELAY_MS);
  state.scheduled.unref();
}

/** The statistics check (single-flight); resolves to the tables it analysed. */
export function runAnalyzeCheck(): Promise<string[]> {
  const state = globalForMaintenance.__engramAnalyze;
  if (!state) return Promise.resolve([]);
  if (state.scheduled) clearTimeout(state.scheduled);
  state.scheduled = undefined;
  state.pending = 0;
  state.running ??= runAsBackground(() => analyzeIfDue(state.sql))
    .catch((error) => {
      console.error("[engram] database statistics check failed", error);
      return [];
    })
    .finally(() => {
      state.running = undefined;
    });
  return state.running;
}

/**
 * ANALYZE the tables whose rows changed by more than 50 + 10 % since their last analysis,
 * like PostgreSQL's autoanalyze: after a bulk import the planner knows the tables are large (a
 * never-analysed table is planned as if it were nearly empty), so recall uses its indexes.
 */
export async function analyzeIfDue(sql: SqlRunner): Promise<string[]> {
  await sql.exec(`SELECT pg_stat_force_next_flush()`);
  const rows = await tableActivity(sql, "n_mod_since_analyze");
  const due = rows.filter((row) => row.changed >= ANALYZE_MIN_CHANGED + ANALYZE_SHARE * row.live);
  for (const row of due) await sql.exec(`ANALYZE ${quoteIdent(row.schema)}.${quoteIdent(row.relname)}`);
  if (due.length > 0) await sql.exec(`SELECT pg_stat_force_next_flush()`);
  return due.map((row) => row.relname);
}

/** One maintenance pass; returns the tables it vacuumed. */
export async function maintainEmbeddedDatabase(sql: SqlRunner): Promise<string[]> {
  // Row counters reach the statistics views at most once a second; read them current.
  await sql.exec(`SELECT pg_stat_force_next_flush()`);
  const rows = await tableActivity(sql, "(n_dead_tup + n_mod_since_analyze)");
  const due = rows.filter((row) => row.changed >= MIN_CHANGED_ROWS && row.changed >= CHANGED_SHARE * row.live);
  for (const row of due) await sql.exec(`VACUUM (ANALYZE) ${quoteIdent(row.schema)}.${quoteIdent(row.relname)}`);
  if (due.length > 0) await sql.exec(`SELECT pg_stat_force_next_flush()`);
  return due.map((row) => row.relname);
}
