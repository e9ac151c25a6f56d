import path from "node:path";
import { PrismaClient } from "./generated/client.ts";
import { migrate, type AppliedMigration } from "./migrate.ts";

export type Db = InstanceType<typeof PrismaClient>;

/** Raw access used only by the migration runner and lib/recall. */
export interface SqlRunner {
  exec(sql: string): Promise<void>;
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

export interface Database {
  kind: "pglite" | "postgres";
  prisma: Db;
  sql: SqlRunner;
  /**
   * LISTEN on a channel: `onPayload` gets each NOTIFY payload after its transaction commits;
   * `onReconnect` runs when a lost listening connection is back (NOTIFYs in between were missed).
   * Returns the unlisten.
   */
  listen(channel: string, onPayload: (payload: string) => void, onReconnect?: () => void): Promise<() => Promise<void>>;
  /** PGlite only: the foreground-first queue in front of its one connection (lib/db/statement-scheduler.ts). */
  scheduler?: import("./statement-scheduler.ts").StatementScheduler;
  /** PGlite only: a snapshot of the whole data directory (tests start from one). */
  dump?: () => Promise<Blob>;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** postgres:// URL; when absent the embedded PGlite database is used. */
  url?: string;
  /** PGlite data directory, or "memory://" for a throwaway database. */
  dataDir?: string;
  /** PGlite only: start from this data-directory snapshot. */
  template?: Blob;
  /** Apply pending migrations before returning (default true). */
  migrate?: boolean;
}

/** Opens the embedded database (PGlite + pgvector) or a PostgreSQL server, migrated. */
export async function openDatabase(options: OpenDatabaseOptions = {}): Promise<Database> {
  const database = options.url
    ? await (await import("./postgres.ts")).openPostgres(options.url)
    : await (await import("./pglite.ts")).openPglite(options.dataDir ?? defaultDataDir(), options.template);
  if (options.migrate !== false) {
    try {
      await applyMigrations(database, options.url);
    } catch (error) {
      // getDatabase opens again on the next request: an instance left open would be a second PGlite
      // on the same directory (and another pool) for every request while the migrations fail.
      await database.close().catch(() => undefined);
      throw error;
    }
  }
  return database;
}

/**
 * Applies pending migrations to a database opened from `url` (none: the embedded one). Every runner
 * (server start-up, `npm run db:migrate`) comes through here: processes migrating one PostgreSQL
 * database at once take turns (postgres.ts), or the second applies what the first is applying and fails.
 * PGlite has one process.
 */
export async function applyMigrations(database: Database, url: string | undefined): Promise<AppliedMigration[]> {
  return url ? (await import("./postgres.ts")).withMigrationLock(url, migrate) : migrate(database.sql);
}

export function defaultDataDir(): string {
  return path.resolve(process.env.ENGRAM_DATA_DIR ?? path.join(process.cwd(), ".data"), "pglite");
}

const globalForDb = globalThis as unknown as { __engramDb?: Promise<Database>; __engramDbClosed?: boolean };

/**
 * The process-wide database. Kept on globalThis because Next bundles route
 * handlers and instrumentation separately, and one PGlite directory must
 * never be opened twice in one process.
 */
export function getDatabase(): Promise<Database> {
  // After a graceful stop closed it, nothing may open the data directory again in this process.
  if (globalForDb.__engramDbClosed) return Promise.reject(new Error("the database is closed (the server is stopping)"));
  globalForDb.__engramDb ??= openDatabase({ url: process.env.DATABASE_URL || undefined }).catch((error) => {
    globalForDb.__engramDb = undefined;
    throw error;
  });
  return globalForDb.__engramDb;
}

/** Closes the process-wide database, if one was opened, for good (the server's graceful stop). */
export async function closeDatabase(): Promise<void> {
  const opened = globalForDb.__engramDb;
  globalForDb.__engramDbClosed = true;
  globalForDb.__engramDb = undefined;
  const database = await opened?.catch(() => undefined);
  await database?.close();
}

/** Lets tests install their own database as the process-wide one. */
export function setDatabase(database: Database | undefined): void {
  globalForDb.__engramDbClosed = false;
  globalForDb.__engramDb = database ? Promise.resolve(database) : undefined;
}

/** A client or an interactive transaction: domain helpers that compose take either. */
export type DbClient = Db | Parameters<Parameters<Db["$transaction"]>[0]>[0];
