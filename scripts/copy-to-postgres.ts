// npm run db:copy-to-postgres -- postgres://user@host/db — copies the embedded database (ENGRAM_DATA_DIR)
// into an empty PostgreSQL database (migrated first), after which `DATABASE_URL=… npm start` serves the same
// data. Stop the server first: the embedded database serves one process at a time. The target defaults to
// DATABASE_URL. See docs/operations.md.
import pg from "pg";
import { defaultDataDir, openDatabase } from "../lib/db/database.ts";
import { copyToPostgres, CopyOutcomeUnknownError } from "../lib/db/copy-to-postgres.ts";

/**
 * The target as the log names it, without its password, read by pg's own parser: `new URL` refuses a
 * socket URL with a user (`postgres://engram@/engram?host=/var/run/postgresql`), which failed the copy
 * right after the target was migrated.
 */
function describeTarget(url: string): string {
  const { database, host, port } = new pg.Client({ connectionString: url });
  return `${database} on ${host}:${port}`;
}

async function main() {
  const targetUrl = process.argv[2] || process.env.DATABASE_URL;
  if (!targetUrl || !/^postgres(ql)?:\/\//.test(targetUrl)) {
    throw new Error("usage: npm run db:copy-to-postgres -- postgres://user@host:5432/database (or set DATABASE_URL)");
  }
  const dataDir = defaultDataDir();
  const started = Date.now();
  const source = await openDatabase({ dataDir });
  try {
    console.log(`migrating the target…`);
    await (await openDatabase({ url: targetUrl })).close();
    console.log(`copying ${dataDir} into ${describeTarget(targetUrl)}…`);
    const results = await copyToPostgres(source.sql, targetUrl, {
      onTable: ({ table, rows }) => console.log(`  ${table}: ${rows} rows`),
      onWarning: (message) => console.warn(`warning: ${message}`),
    });
    const total = results.reduce((sum, r) => sum + r.rows, 0);
    console.log(`copied ${total} rows in ${results.length} tables in ${((Date.now() - started) / 1000).toFixed(1)} s; start Engram with DATABASE_URL set to the target`);
  } finally {
    await source.close();
  }
}

main().catch((error) => {
  // Not "failed": the copy may be in the target, and the message says how to tell.
  if (error instanceof CopyOutcomeUnknownError) console.error(`copy outcome unknown: ${error.message}`);
  else console.error(`copy failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
