import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import pg from "pg";
import { migrationsDigest } from "../../lib/db/pglite-template.ts";

/**
 * `npm run test:postgres`: the same suite against a real PostgreSQL server. The global setup
 * starts (or reuses) the server and migrates one template database per migration set; every
 * harness then gets its own database, `CREATE DATABASE … TEMPLATE` of it (a file copy, not a
 * migration run), dropped when the harness closes and, at the latest, when the run ends.
 */
export interface TestPostgres {
  /** A URL on the server with the right to create databases (its own database is never written). */
  adminUrl: string;
  /** The migrated template every test database is copied from. */
  template: string;
  /** Prefix of this run's test databases (the teardown drops what is left of them). */
  prefix: string;
}

const root = path.resolve(import.meta.dirname, "..", "..");
const HOURS = 3_600_000;

/** True when this vitest run targets PostgreSQL (`npm run test:postgres` sets it). */
export const postgresMode = () => process.env.ENGRAM_TEST_DATABASE === "postgres";

/**
 * The server's URL: ENGRAM_TEST_POSTGRES_URL when given (any PostgreSQL ≥ 15 with pgvector and a role
 * that may create databases), else `pg-server start` — ENGRAM_PG_SERVER, or `shared/tools/pg-server`
 * found beside the checkout or above it — with ENGRAM_PG_DIR / ENGRAM_PG_PORT (its defaults otherwise).
 */
export function ensurePostgresServer(logLine: (line: string) => void): string {
  if (process.env.ENGRAM_TEST_POSTGRES_URL) {
    logLine(`postgres: ENGRAM_TEST_POSTGRES_URL`);
    return process.env.ENGRAM_TEST_POSTGRES_URL;
  }
  let script = process.env.ENGRAM_PG_SERVER;
  for (let dir = root; !script; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "shared", "tools", "pg-server");
    if (existsSync(candidate)) script = candidate;
    if (path.dirname(dir) === dir) break;
  }
  if (!script || !existsSync(script)) {
    throw new Error("pg-server was not found: put it at ../shared/tools/pg-server, set ENGRAM_PG_SERVER, or point ENGRAM_TEST_POSTGRES_URL at a server");
  }
  const args = ["start", process.env.ENGRAM_PG_DIR ?? "/tmp/engram-pg", process.env.ENGRAM_PG_PORT ?? "54329"];
  logLine(`postgres: ${script} ${args.join(" ")}`);
  const run = spawnSync("bash", [script, ...args], { encoding: "utf8" });
  const url = /DATABASE_URL=(\S+)\s*$/.exec(run.stdout ?? "")?.[1];
  if (run.status !== 0 || !url) throw new Error(`pg-server failed (exit ${run.status}): ${run.stdout}${run.stderr}`);
  return url;
}

/** The same server, another database. */
export function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

async function withAdmin<T>(adminUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * The migrated template for the current migrations, built once per server and migration set (an
 * advisory lock keeps two runs from building it together; it appears under its name only once
 * complete). Templates of other migration sets and test databases left by crashed runs are dropped
 * once they are a day / six hours old.
 */
export async function ensurePostgresTemplate(adminUrl: string, logLine: (line: string) => void): Promise<TestPostgres> {
  const template = `engram_tpl_${migrationsDigest()}`;
  const runId = Date.now().toString(36);
  await withAdmin(adminUrl, async (admin) => {
    await admin.query(`SELECT pg_advisory_lock(hashtext('engram test template'))`);
    try {
      const existing = await admin.query<{ datname: string; description: string | null }>(
        `SELECT d.datname, shobj_description(d.oid, 'pg_database') AS description FROM pg_database d
          WHERE d.datname LIKE 'engram\\_tpl\\_%' OR d.datname LIKE 'engram\\_t\\_%'`,
      );
      for (const row of existing.rows) {
        const created = Number(row.description?.match(/^engram-test (\d+)$/)?.[1] ?? 0);
        const stale = row.datname.startsWith("engram_tpl_") ? created < Date.now() - 24 * HOURS : created < Date.now() - 6 * HOURS;
        if (row.datname !== template && stale) await admin.query(`DROP DATABASE IF EXISTS ${quote(row.datname)} WITH (FORCE)`).catch(() => undefined);
      }
      if (existing.rows.some((r) => r.datname === template)) {
        logLine(`postgres: template ${template} ready`);
        return;
      }
      logLine(`postgres: migrating template ${template}`);
      const building = `${template}_building`;
      await admin.query(`DROP DATABASE IF EXISTS ${quote(building)} WITH (FORCE)`);
      await admin.query(`CREATE DATABASE ${quote(building)}`);
      const { openDatabase } = await import("../../lib/db/database.ts");
      const db = await openDatabase({ url: databaseUrl(adminUrl, building) });
      await db.close();
      await whileInUse(() => admin.query(`ALTER DATABASE ${quote(building)} RENAME TO ${quote(template)}`));
      await admin.query(`COMMENT ON DATABASE ${quote(template)} IS 'engram-test ${Date.now()}'`);
    } finally {
      await admin.query(`SELECT pg_advisory_unlock(hashtext('engram test template'))`);
    }
  });
  return { adminUrl, template, prefix: `engram_t_${runId}_` };
}

/**
 * Retries a statement that needs a database nobody is connected to ("… is being accessed by other
 * users", 55006): a closed pool's backends take a moment to exit.
 */
async function whileInUse<T>(statement: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await statement();
    } catch (error) {
      if ((error as { code?: string }).code !== "55006" || attempt >= 50) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

let created = 0;

/**
 * A fresh database copied from the template; returns its URL and the drop. Copies from one template
 * may not overlap a session connected to it: none is (the template is never opened after it is built).
 */
export async function createTestDatabase(info: TestPostgres): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  created += 1;
  const name = `${info.prefix}${process.pid}_${created}`;
  await withAdmin(info.adminUrl, async (admin) => {
    await whileInUse(() => admin.query(`CREATE DATABASE ${quote(name)} TEMPLATE ${quote(info.template)}`));
    await admin.query(`COMMENT ON DATABASE ${quote(name)} IS 'engram-test ${Date.now()}'`);
    // A test database need not survive a crash of the server: commits skip the wait for the disk
    // flush (the data stays consistent; locking and visibility are unchanged).
    await admin.query(`ALTER DATABASE ${quote(name)} SET synchronous_commit = off`);
  });
  return {
    url: databaseUrl(info.adminUrl, name),
    name,
    drop: () => withAdmin(info.adminUrl, async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS ${quote(name)} WITH (FORCE)`))),
  };
}

/** The end of a run: drops whatever test databases of this run are still there. */
export async function dropRunDatabases(info: TestPostgres): Promise<number> {
  return withAdmin(info.adminUrl, async (admin) => {
    const left = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE starts_with(datname, $1)`, [info.prefix]);
    for (const row of left.rows) await admin.query(`DROP DATABASE IF EXISTS ${quote(row.datname)} WITH (FORCE)`);
    return left.rows.length;
  });
}
