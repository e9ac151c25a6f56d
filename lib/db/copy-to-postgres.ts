import pg from "pg";
import type { SqlRunner } from "./database.ts";

/** Rows read and written per statement, at most. */
const BATCH_ROWS = 500;
/**
 * Bytes of row JSON per statement, at most (one larger row goes alone): a memory may hold 3 MiB,
 * and 500 such rows made one result and one JSON parameter past V8's ~512 MiB string limit.
 */
const BATCH_BYTES = 32 * 1024 * 1024;
/**
 * Not copied: the migration runner's own table (the target has its own, written by the same
 * migrations), and the lexical index's change log and horizon, whose transaction ids mean nothing
 * in another database (the target's processes build their indexes from the copied rows).
 */
const SKIPPED_TABLES = new Set(["_prisma_migrations", "recall_index_changes", "recall_index_horizon"]);

export interface CopyTableResult {
  table: string;
  rows: number;
}

/**
 * The connection went while the COMMIT was under way: the server may have committed the copy before
 * the answer was lost, or not. Nothing on the client tells which; the target does.
 */
export class CopyOutcomeUnknownError extends Error {}

export interface CopyToPostgresOptions {
  /** Called after each table (progress for the command line). */
  onTable?: (result: CopyTableResult) => void;
  /** Something that went wrong after the rows were committed (the copy itself stands). */
  onWarning?: (message: string) => void;
  /** Overrides BATCH_BYTES (tests use a small one). */
  batchBytes?: number;
}

/**
 * How to tell from the target whether a copy cut during its COMMIT went in: the table it wrote most rows
 * to. The target was empty when the copy began (checked in its transaction) and every table's count
 * matched the source's before the COMMIT, so those rows mean complete and none means rolled back. It
 * said to count users, which a fresh install has none of: its committed copy looked rolled back.
 */
function outcomeCheck(results: CopyTableResult[]): string {
  const largest = results.reduce<CopyTableResult | undefined>((most, result) => (result.rows > (most?.rows ?? 0) ? result : most), undefined);
  if (!largest) return "The source had no rows to copy: the target is empty either way, and the copy can run again into the same database";
  return (
    `Check the target: if SELECT count(*) FROM ${largest.table} there finds ${largest.rows}, the copy is complete (the target was empty, and every table's rows were counted before the COMMIT); ` +
    `if it finds none, the copy was rolled back and can run again into the same database`
  );
}

/**
 * Copies every row of an embedded database into an empty PostgreSQL database migrated to the same
 * version (the way to grow from `npm start` on one machine to several processes on PostgreSQL).
 *
 * One transaction on the target, so a failure leaves it as empty as it was. Tables go parents
 * first (foreign keys stay checked); a table that refers to itself (topics) goes in one statement,
 * as foreign keys are checked at its end. The target's own triggers (full-text, BM25 statistics,
 * storage usage) are off during the copy: what they maintain is copied as it is, and its secondary
 * indexes are rebuilt after the rows are in. Sequences continue after the copied rows, and every
 * table's row count is compared before the commit.
 */
export async function copyToPostgres(source: SqlRunner, targetUrl: string, options: CopyToPostgresOptions = {}): Promise<CopyTableResult[]> {
  const tables = await copyOrder(source);
  const target = new pg.Client({ connectionString: targetUrl });
  // A connection cut mid-copy (server restart, network) also fails the statement in flight; without a
  // listener pg's 'error' event would be thrown as an uncaught exception and end the command uncleanly.
  let lost: Error | undefined;
  target.on("error", (error) => {
    lost ??= error;
  });
  await target.connect();
  let committing = false;
  let committed = false;
  const results: CopyTableResult[] = [];
  try {
    await target.query("BEGIN");
    const occupied: string[] = [];
    for (const { table } of tables) {
      const { rows } = await target.query<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM ${ident(table)}) AS any`);
      if (rows[0]?.any) occupied.push(table);
    }
    if (occupied.length > 0) throw new Error(`the target database is not empty (rows in ${occupied.join(", ")}); copy into a new, empty database`);
    for (const { table } of tables) await target.query(`ALTER TABLE ${ident(table)} DISABLE TRIGGER USER`);
    // Secondary indexes (HNSW, full-text, B-trees not behind a constraint) are built once after the
    // rows are in, as pg_restore does: inserting 10k chunks into a live HNSW index took 39 s.
    const indexes = (
      await target.query<{ name: string; definition: string }>(
        `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS definition
         FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
         WHERE t.relnamespace = 'public'::regnamespace AND t.relname = ANY($1::text[])
           AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`,
        [tables.map((t) => t.table)],
      )
    ).rows;
    for (const index of indexes) await target.query(`DROP INDEX ${index.name}`);

    for (const table of tables) {
      const result = await copyTable(source, target, table, options.batchBytes ?? BATCH_BYTES);
      results.push(result);
      options.onTable?.(result);
    }

    await target.query(`SET LOCAL maintenance_work_mem = '256MB'`);
    for (const index of indexes) await target.query(index.definition);
    for (const { table } of tables) await target.query(`ALTER TABLE ${ident(table)} ENABLE TRIGGER USER`);
    // Serial columns (the event stream's sequence) continue after the copied rows.
    const serials = await target.query<{ table_name: string; column_name: string }>(
      `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' AND column_default LIKE 'nextval(%'`,
    );
    for (const { table_name, column_name } of serials.rows) {
      await target.query(
        `SELECT setval(pg_get_serial_sequence($1, $2), coalesce((SELECT max(${ident(column_name)}) FROM ${ident(table_name)}), 0) + 1, false)`,
        [ident(table_name), column_name],
      );
    }
    committing = true;
    await target.query("COMMIT");
    committed = true;
    // The planner's statistics, which autovacuum would also gather in time: failing here leaves the copy whole.
    try {
      await target.query("ANALYZE");
    } catch (error) {
      options.onWarning?.(`the rows are copied, but ANALYZE failed (${error instanceof Error ? error.message : String(error)}); run ANALYZE on the target`);
    }
    return results;
  } catch (error) {
    const rolledBack = await target.query("ROLLBACK").then(
      () => true,
      () => false,
    );
    // No connection to roll back on: the server drops the uncommitted transaction with it.
    if (!rolledBack && committing && !committed) {
      throw new CopyOutcomeUnknownError(
        `the connection to the target database was lost during its COMMIT (${(lost ?? (error as Error)).message}): whether the copy was committed is unknown. ${outcomeCheck(results)}`,
      );
    }
    if (!rolledBack && !committed) {
      throw new Error(`the connection to the target database was lost (${(lost ?? (error as Error)).message}); nothing was copied`);
    }
    throw error;
  } finally {
    await target.end();
  }
}

/**
 * One table's rows, in batches over the physical row id (nothing writes the source meanwhile: the
 * copy holds its directory), each batch at most BATCH_ROWS rows and `batchBytes` of JSON; a
 * self-referencing table in one statement. Counts are checked on both sides.
 */
async function copyTable(
  source: SqlRunner,
  target: pg.Client,
  { table, selfReferencing }: { table: string; selfReferencing: boolean },
  batchBytes: number,
): Promise<CopyTableResult> {
  let copied = 0;
  let after = "(0,0)";
  for (;;) {
    let range = "";
    const params: string[] = [after];
    if (!selfReferencing) {
      // The next rows' sizes first (a small result), then as many of them as fit in batchBytes.
      const sizes = await source.query<{ ctid: string; bytes: number }>(
        `SELECT t.ctid::text AS ctid, octet_length(row_to_json(t)::text) AS bytes FROM ${ident(table)} t WHERE t.ctid > $1::tid ORDER BY t.ctid LIMIT ${BATCH_ROWS}`,
        [after],
      );
      if (sizes.length === 0) break;
      let last = 0;
      for (let total = sizes[0]!.bytes; last + 1 < sizes.length && total + sizes[last + 1]!.bytes <= batchBytes; last++) total += sizes[last + 1]!.bytes;
      range = " AND t.ctid <= $2::tid";
      params.push(sizes[last]!.ctid);
    }
    const rows = await source.query<{ ctid: string; row: string }>(
      `SELECT t.ctid::text AS ctid, row_to_json(t)::text AS row FROM ${ident(table)} t WHERE t.ctid > $1::tid${range} ORDER BY t.ctid`,
      params,
    );
    if (rows.length === 0) break;
    await target.query(`INSERT INTO ${ident(table)} SELECT * FROM json_populate_recordset(NULL::${ident(table)}, $1::json)`, [`[${rows.map((r) => r.row).join(",")}]`]);
    copied += rows.length;
    after = rows.at(-1)!.ctid;
    if (selfReferencing) break;
  }
  const count = (await target.query<{ count: string }>(`SELECT count(*)::text AS count FROM ${ident(table)}`)).rows[0]?.count;
  const expected = (await source.query<{ count: string }>(`SELECT count(*)::text AS count FROM ${ident(table)}`))[0]?.count;
  if (Number(count) !== copied || Number(expected) !== copied) throw new Error(`${table}: read ${copied} rows of ${expected}, the target has ${count}`);
  return { table, rows: copied };
}

/** The source's tables, each after the tables it refers to. */
async function copyOrder(source: SqlRunner): Promise<{ table: string; selfReferencing: boolean }[]> {
  const tables = (await source.query<{ name: string }>(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`))
    .map((row) => row.name)
    .filter((name) => !SKIPPED_TABLES.has(name));
  const references = await source.query<{ child: string; parent: string }>(
    `SELECT c.conrelid::regclass::text AS child, c.confrelid::regclass::text AS parent FROM pg_constraint c WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace`,
  );
  const parents = new Map(tables.map((table) => [table, new Set<string>()]));
  const selfReferencing = new Set<string>();
  for (const { child, parent } of references) {
    const [c, p] = [unquote(child), unquote(parent)];
    if (c === p) selfReferencing.add(c);
    else parents.get(c)?.add(p);
  }
  const ordered: string[] = [];
  const placed = new Set<string>();
  while (ordered.length < tables.length) {
    const ready = tables.filter((table) => !placed.has(table) && [...parents.get(table)!].every((parent) => placed.has(parent) || !parents.has(parent)));
    if (ready.length === 0) throw new Error(`foreign keys form a cycle among ${tables.filter((t) => !placed.has(t)).join(", ")}`);
    for (const table of ready) {
      ordered.push(table);
      placed.add(table);
    }
  }
  return ordered.map((table) => ({ table, selfReferencing: selfReferencing.has(table) }));
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;
const unquote = (name: string) => (name.startsWith('"') ? name.slice(1, -1).replace(/""/g, '"') : name);
