import { spawn } from "node:child_process";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { listMigrations, migrate } from "@/lib/db/migrate.ts";
import { newId } from "@/lib/ids.ts";
import { withMigrationLock } from "@/lib/db/postgres.ts";

/**
 * `npm run db:migrate` on PostgreSQL while a server starts (or a second deploy step migrates) on the
 * same fresh database. Needs a real PostgreSQL server; skipped without one, like tests/multi-process.test.ts.
 */
const serverUrl =
  inject("postgres")?.adminUrl || process.env.ENGRAM_TEST_POSTGRES_URL || (process.env.DATABASE_URL?.startsWith("postgres") ? process.env.DATABASE_URL : undefined);
if (!serverUrl) console.warn("tests/migrate-postgres.test.ts skipped: set ENGRAM_TEST_POSTGRES_URL (or DATABASE_URL) to a PostgreSQL server");

const root = path.resolve(import.meta.dirname, "..");
/** The session lock lib/db/postgres.ts takes around migrations: Prisma Migrate's own (its schema engine's key). */
const PRISMA_MIGRATE_LOCK = 72707369;

function runMigrateScript(url: string): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [path.join(root, "node_modules", "tsx", "dist", "cli.mjs"), path.join(root, "scripts", "migrate.ts")], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: url },
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, output })));
}

describe.skipIf(!serverUrl)("npm run db:migrate on PostgreSQL", () => {
  let admin: pg.Client;
  let dbName: string;
  let url: string;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    dbName = `engram_migrate_${Date.now().toString(36)}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
    const parsed = new URL(serverUrl!);
    parsed.pathname = `/${dbName}`;
    url = parsed.toString();
  });

  afterAll(async () => {
    for (const name of [dbName, ...extraDbs]) await admin?.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin?.end();
  });

  const extraDbs: string[] = [];
  /** Another fresh database on the same server. */
  async function freshDatabase(): Promise<string> {
    const name = `engram_migrate_${Date.now().toString(36)}_${extraDbs.length}`;
    await admin.query(`CREATE DATABASE ${name}`);
    extraDbs.push(name);
    const parsed = new URL(serverUrl!);
    parsed.pathname = `/${name}`;
    return parsed.toString();
  }

  it("takes its turn with a server start migrating the same database: waits for the migration lock, then applies each migration once", async () => {
    // A server start in progress holds the lock (lib/db/postgres.ts withMigrationLock).
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query("SELECT pg_advisory_lock($1::bigint)", [PRISMA_MIGRATE_LOCK]);
      const runs = [runMigrateScript(url), runMigrateScript(url)];
      let finished = 0;
      for (const run of runs) void run.then(() => finished++);
      // Both scripts queue behind the lock instead of migrating under the server's feet.
      let waiting = 0;
      for (let i = 0; i < 300 && finished === 0 && waiting < 2; i++) {
        await new Promise((r) => setTimeout(r, 100));
        const rows = await admin.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
            WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = $1`,
          [dbName],
        );
        waiting = rows.rows[0]!.n;
      }
      expect(finished).toBe(0);
      expect(waiting).toBe(2);
      const tables = await holder.query(`SELECT 1 FROM pg_tables WHERE tablename = '_prisma_migrations'`);
      expect(tables.rowCount).toBe(0);
      await holder.query("SELECT pg_advisory_unlock($1::bigint)", [PRISMA_MIGRATE_LOCK]);
      const results = await Promise.all(runs);
      for (const result of results) expect(result.code, result.output).toBe(0);
      expect(results.map((r) => /applied \d+ migration/.test(r.output)).sort()).toEqual([false, true]);
      const applied = await holder.query<{ migration_name: string; n: number }>(
        `SELECT migration_name, count(*)::int AS n FROM _prisma_migrations WHERE finished_at IS NOT NULL GROUP BY migration_name ORDER BY migration_name`,
      );
      expect(applied.rows).toEqual(listMigrations().map((m) => ({ migration_name: m.name, n: 1 })));
    } finally {
      await holder.end();
    }
  });

  it("takes its turn with `prisma migrate deploy` (the README's other way to migrate): waits while Prisma Migrate's own lock is held", async () => {
    const fresh = await freshDatabase();
    // What `prisma migrate deploy` holds while it applies the same folder.
    const prisma = new pg.Client({ connectionString: fresh });
    await prisma.connect();
    try {
      await prisma.query("SELECT pg_advisory_lock($1::bigint)", [PRISMA_MIGRATE_LOCK]);
      let finished = false;
      const run = runMigrateScript(fresh).finally(() => (finished = true));
      let waiting = 0;
      for (let i = 0; i < 300 && !finished && waiting < 1; i++) {
        await new Promise((r) => setTimeout(r, 100));
        const rows = await prisma.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        );
        waiting = rows.rows[0]!.n;
      }
      // Without the shared lock the script migrated beside Prisma: both apply the same migration, one fails.
      const early = finished ? await run : undefined;
      expect(early?.output ?? "", "the script migrated while Prisma Migrate held its lock").toBe("");
      expect(waiting).toBe(1);
      expect((await prisma.query(`SELECT 1 FROM pg_tables WHERE tablename = '_prisma_migrations'`)).rowCount).toBe(0);
      await prisma.query("SELECT pg_advisory_unlock($1::bigint)", [PRISMA_MIGRATE_LOCK]);
      const result = await run;
      expect(result.code, result.output).toBe(0);
      const applied = await prisma.query<{ n: number }>(`SELECT count(*)::int AS n FROM _prisma_migrations WHERE finished_at IS NOT NULL`);
      expect(applied.rows[0]!.n).toBe(listMigrations().length);
    } finally {
      await prisma.end();
    }
  });

  // Every process migrates at start-up, so during a rolling deploy older processes still write while a
  // newer one migrates. The migration recounting the users' counters from the memories (with per-hub
  // shares) read them without a lock: a push committed while it ran was missing from its share for good.
  it("the migration counting users' storage by membership counts a push an older process commits while it runs", async () => {
    const target = "20261203060000_member_storage_usage";
    const url = await freshDatabase();
    const dir = mkdtempSync(path.join(tmpdir(), "engram-migrations-"));
    const all = path.join(root, "prisma", "migrations");
    for (const m of listMigrations(all)) if (m.name < target) cpSync(path.join(all, m.name), path.join(dir, m.name), { recursive: true });
    const older = new pg.Client({ connectionString: url });
    await older.connect();
    try {
      await withMigrationLock(url, (sql) => migrate(sql, dir));
      const [user, hub] = [newId(), newId()];
      const memory = (content: string) => `INSERT INTO memories (id, hub_id, owner_id, title, content, content_type, content_hash, kind, stability, state, source, created_at, updated_at)
        VALUES ('${newId()}', '${hub}', '${user}', 't', '${content}', 'markdown', '${content}', 'semantic', 'stable', 'active', 'cli', now(), now())`;
      await older.query(`
        INSERT INTO users (id, email, name, created_at, updated_at) VALUES ('${user}', 'r@example.test', 'R', now(), now());
        INSERT INTO hubs (id, name, slug, hub_type, owner_id, created_at, updated_at) VALUES ('${hub}', 'H', 'rolling-hub', 'team', '${user}', now(), now());
        INSERT INTO hub_members (hub_id, user_id, role, joined_at) VALUES ('${hub}', '${user}', 'owner', now());
        ${memory("abcd")};`);
      // An older process's push, under way when the newer process starts migrating.
      await older.query("BEGIN");
      await older.query(memory("efghij"));
      cpSync(path.join(all, target), path.join(dir, target), { recursive: true });
      const migrating = withMigrationLock(url, (sql) => migrate(sql, dir));
      for (let waited = 0; ; waited += 20) {
        const { rows } = await admin.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND $1::int = ANY(pg_blocking_pids(l.pid))`,
          [(await older.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid],
        );
        if (rows[0]!.n > 0) break;
        if (waited > 60_000) throw new Error("the migration never waited for the push");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await older.query("COMMIT");
      expect((await migrating).map((m) => m.name)).toEqual([target]);
      const share = await older.query<{ bytes: string; memories: number }>(`SELECT bytes::text, memories FROM hub_owner_usage WHERE hub_id = $1 AND owner_id = $2`, [hub, user]);
      expect(share.rows.map((r) => [Number(r.bytes), r.memories])).toEqual([[10, 2]]);
      const counter = await older.query<{ bytes: string; memories: number }>(`SELECT bytes::text, memories FROM storage_usage WHERE scope = 'user' AND scope_id = $1`, [user]);
      expect(counter.rows.map((r) => [Number(r.bytes), r.memories])).toEqual([[10, 2]]);
    } finally {
      await older.end();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);

  // A migration's LOCK TABLE waiting behind an older process's transaction queued every later write of
  // every process behind it, for as long as that transaction ran.
  it("a migration waiting for a lock gives up and tries again rather than hold up every write behind it", async () => {
    const url = await freshDatabase();
    const dir = mkdtempSync(path.join(tmpdir(), "engram-migrations-"));
    const older = new pg.Client({ connectionString: url });
    const writer = new pg.Client({ connectionString: url });
    await Promise.all([older.connect(), writer.connect()]);
    try {
      await older.query("CREATE TABLE probe_rows (n int)");
      const probe = path.join(dir, "20990101000000_probe_lock");
      mkdirSync(probe);
      writeFileSync(path.join(probe, "migration.sql"), `LOCK TABLE probe_rows IN SHARE MODE;\nINSERT INTO probe_rows VALUES (0);`);
      // An older process's write, under way when the migration starts.
      await older.query("BEGIN");
      await older.query("INSERT INTO probe_rows VALUES (1)");
      const migrating = withMigrationLock(url, (sql) => migrate(sql, dir, { lockTimeoutMs: 200, attempts: 1000 }));
      migrating.catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 100));
      // Another write, from any process, while the older one is still open.
      const written = writer.query("INSERT INTO probe_rows VALUES (2)").then(() => "written");
      const outcome = await Promise.race([written, new Promise((resolve) => setTimeout(() => resolve("held up"), 5000))]);
      expect(outcome).toBe("written");
      await older.query("COMMIT");
      expect((await migrating).map((m) => m.name)).toEqual(["20990101000000_probe_lock"]);
      expect((await writer.query<{ n: number }>("SELECT n FROM probe_rows ORDER BY n")).rows.map((r) => r.n)).toEqual([0, 1, 2]);
    } finally {
      await older.query("ROLLBACK").catch(() => undefined);
      await Promise.all([older.end(), writer.end()]);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("a migration connection cut mid-migration fails the migration with its error, not an uncaught exception", async () => {
    const target = await freshDatabase();
    const killer = new pg.Client({ connectionString: target });
    await killer.connect();
    try {
      const migrating = withMigrationLock(target, async (sql) => {
        await killer.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
        // Cut between statements (a migration's file being read, say): pg reports it as an 'error' event.
        await new Promise((resolve) => setTimeout(resolve, 300));
        await sql.query("SELECT 1");
      });
      await expect(migrating).rejects.toThrow(/^the connection to the database was lost while migrating \(terminating connection/);
    } finally {
      await killer.end();
    }
  });
});
