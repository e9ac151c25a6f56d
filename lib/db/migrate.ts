import { createHash, randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import type { SqlRunner } from "./database.ts";

export interface AppliedMigration {
  name: string;
  checksum: string;
}

/** Same table Prisma Migrate keeps, so `prisma migrate deploy` sees these as applied. */
const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

export function migrationsDir(): string {
  return process.env.ENGRAM_MIGRATIONS_DIR ?? path.join(/*turbopackIgnore: true*/ process.cwd(), "prisma", "migrations");
}

export function listMigrations(dir = migrationsDir()): { name: string; sql: string; checksum: string }[] {
  // The folder is read at run time, not bundled: keep the bundler from tracing it.
  if (!existsSync(/*turbopackIgnore: true*/ dir)) throw new Error(`Migrations folder not found: ${dir}`);
  return readdirSync(/*turbopackIgnore: true*/ dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(/*turbopackIgnore: true*/ path.join(dir, entry.name, "migration.sql")))
    .map((entry) => entry.name)
    .sort()
    .map((name) => {
      const sql = readFileSync(/*turbopackIgnore: true*/ path.join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    });
}

export interface MigrateOptions {
  /** How long one attempt waits for a table lock before it gives up and tries again (lock_timeout). */
  lockTimeoutMs?: number;
  /** Attempts per migration before the start-up fails. */
  attempts?: number;
}

/** PostgreSQL's lock_not_available: a lock_timeout ran out. */
const LOCK_NOT_AVAILABLE = "55P03";

/**
 * Applies pending migrations in order, each in its own transaction, and
 * records them exactly as Prisma Migrate would. Refuses to run when an applied
 * migration was edited afterwards or a previous one failed half-way.
 *
 * Each attempt waits at most `lockTimeoutMs` for a lock. Every process migrates at start-up, so during a
 * rolling deploy older processes are writing: a migration's lock waiting behind one of their transactions
 * queued every later write of every process behind it, for as long as that transaction ran. Given up,
 * the writes go on, and the migration tries again shortly after.
 */
export async function migrate(sql: SqlRunner, dir = migrationsDir(), options: MigrateOptions = {}): Promise<AppliedMigration[]> {
  const lockTimeoutMs = options.lockTimeoutMs ?? 3000;
  const attempts = options.attempts ?? 60;
  await sql.exec(MIGRATIONS_TABLE);
  const rows = await sql.query<{ migration_name: string; checksum: string; finished_at: Date | null; rolled_back_at: Date | null }>(
    `SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations"`,
  );
  const applied = new Map(rows.filter((r) => r.rolled_back_at === null).map((r) => [r.migration_name, r]));
  const done: AppliedMigration[] = [];
  for (const migration of listMigrations(dir)) {
    const previous = applied.get(migration.name);
    if (previous) {
      if (previous.finished_at === null) throw new Error(`Migration ${migration.name} failed earlier; resolve it before starting`);
      if (previous.checksum !== migration.checksum) throw new Error(`Migration ${migration.name} was modified after it was applied`);
      continue;
    }
    // Recorded in the migration's own transaction: applied but unrecorded (a crash or a lost connection
    // between two statements) would make every later start re-run it and fail on what it created.
    const record = `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, started_at, applied_steps_count)
       VALUES (${literal(randomUUID())}, ${literal(migration.checksum)}, now(), ${literal(migration.name)}, now(), 1)`;
    for (let attempt = 1; ; attempt++) {
      const failed = await sql
        .exec(`BEGIN;\nSET LOCAL lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))};\n${migration.sql}\n;${record};COMMIT;`)
        .then(() => null)
        .catch(async (error: unknown) => {
          await sql.exec("ROLLBACK").catch(() => undefined);
          return error as Error & { code?: string };
        });
      if (!failed) break;
      if (failed.code !== LOCK_NOT_AVAILABLE || attempt >= attempts) {
        const waited = failed.code === LOCK_NOT_AVAILABLE ? ` (a lock still held by another transaction after ${attempts} attempts of ${lockTimeoutMs} ms)` : "";
        throw new Error(`Migration ${migration.name} failed: ${failed.message}${waited}`);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 250 * 2 ** (attempt - 1))));
    }
    done.push({ name: migration.name, checksum: migration.checksum });
  }
  return done;
}

/** A SQL string literal (standard_conforming_strings: only quotes need doubling), for the one multi-statement exec. */
function literal(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}
