import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { positiveIntEnv } from "@/lib/config.ts";
import { PrismaClient } from "./generated/client.ts";
import { backgroundConnections, isBackgroundWork } from "./background-work.ts";
import type { Database, SqlRunner } from "./database.ts";

/** A PostgreSQL ≥ 15 server with pgvector, via node-postgres. */
export async function openPostgres(connectionString: string): Promise<Database> {
  // Checked before anything connects: Number("ten") made a pool of NaN connections, which pg reads as no bound.
  const size = positiveIntEnv("ENGRAM_DB_POOL_SIZE", 10);
  const pool = new pg.Pool({ connectionString, max: size });
  // An idle connection dropped by the server (restart, failover, idle timeout) is discarded by the pool; without a
  // listener its 'error' event would be thrown and take the whole process down.
  pool.on("error", (error) => console.error("[engram] database: an idle connection was lost", error.message));
  // Prisma's defaults (2 s to get a connection, 5 s per transaction) turn a burst of writes that
  // queue on one row or advisory lock into 500s once the pool is busy; wait longer before giving up.
  const prisma = new PrismaClient({
    adapter: new PrismaPg(boundedBackground(pool, backgroundConnections(size))),
    transactionOptions: { maxWait: 10_000, timeout: 20_000 },
  });
  return {
    kind: "postgres",
    prisma,
    sql: {
      exec: async (sql) => {
        await pool.query(sql);
      },
      query: async <T,>(sql: string, params: unknown[] = []) => (await pool.query(sql, params)).rows as T[],
    },
    listen: (channel, onPayload, onReconnect) => listenPostgres(connectionString, channel, onPayload, onReconnect),
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

/**
 * The pool as Prisma sees it: background work (the pipeline) holds at most `limit` connections at
 * once, so requests never queue behind a backlog of chunk writes for a connection.
 */
function boundedBackground(pool: pg.Pool, limit: number): pg.Pool {
  let held = 0;
  const waiting: (() => void)[] = [];
  const acquire = async (): Promise<() => void> => {
    if (held >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    else held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = waiting.shift();
      if (next) next(); // the slot passes straight to the next waiter
      else held--;
    };
  };
  const query = async (...args: unknown[]) => {
    if (!isBackgroundWork()) return (pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
    const release = await acquire();
    try {
      return await (pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
    } finally {
      release();
    }
  };
  const connect = async () => {
    if (!isBackgroundWork()) return pool.connect();
    const release = await acquire();
    try {
      const client = await pool.connect();
      const releaseClient = client.release.bind(client);
      client.release = (error?: Error | boolean) => {
        client.release = releaseClient; // the pool hands this client out again, maybe to a request
        release();
        releaseClient(error);
      };
      return client;
    } catch (error) {
      release();
      throw error;
    }
  };
  return new Proxy(pool, {
    get(target, property) {
      if (property === "query") return query;
      if (property === "connect") return connect;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * One dedicated connection per listener (LISTEN needs a session, not a pooled
 * client). A dropped connection is re-established after a pause; NOTIFYs sent
 * meanwhile are lost, which is why event streams replay from the table.
 */
async function listenPostgres(
  connectionString: string,
  channel: string,
  onPayload: (payload: string) => void,
  onReconnect?: () => void,
): Promise<() => Promise<void>> {
  let client: pg.Client | undefined;
  let stopped = false;
  const connect = async (): Promise<void> => {
    // TCP keepalive: a peer gone without a reset (failover, partition) is noticed and the LISTEN re-made.
    const next = new pg.Client({ connectionString, keepAlive: true });
    let live = false;
    next.on("notification", (message) => {
      if (message.channel === channel && message.payload !== undefined) onPayload(message.payload);
    });
    next.on("error", (error) => {
      console.error(`[engram] LISTEN ${channel}: connection lost; reconnecting`, error.message);
      void next.end().catch(() => undefined);
      if (client === next) client = undefined;
      // Only the listening connection starts a reconnect: one lost while being set up is the caller's
      // to retry (its connect() fails), and a second chain would listen twice and deliver all twice.
      if (!stopped && live) setTimeout(() => void reconnect(), 1000).unref();
    });
    try {
      await next.connect();
      await next.query(`LISTEN "${channel.replaceAll('"', "")}"`);
    } catch (error) {
      // Connected but not listening (the LISTEN refused): ended here, or every retry leaked a connection.
      await next.end().catch(() => undefined);
      throw error;
    }
    if (stopped) await next.end();
    else {
      client = next;
      live = true;
    }
  };
  const reconnect = async (): Promise<void> => {
    try {
      await connect();
      onReconnect?.();
    } catch {
      if (!stopped) setTimeout(() => void reconnect(), 2000).unref();
    }
  };
  await connect();
  return async () => {
    stopped = true;
    await client?.end().catch(() => undefined);
  };
}

/**
 * The session lock that serialises migrations: Prisma Migrate's own key (its schema engine takes
 * `pg_advisory_lock(72707369)`), so a `prisma migrate deploy` of the same folder and a starting server
 * take turns too. With a key of our own both applied the same migration at once: one of them failed,
 * and a failed Prisma record stops every later start until it is resolved by hand.
 */
const MIGRATION_LOCK = 72707369;

/**
 * Runs `fn` (the migration runner) on one dedicated connection holding a session advisory lock, so
 * several processes starting at once on a fresh database migrate one after the other: the first applies
 * the migrations, the others then find them applied.
 */
export async function withMigrationLock<T>(connectionString: string, fn: (sql: SqlRunner) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  // A connection cut between statements (server restart, failover) is reported as an 'error' event:
  // unheard, pg throws it as an uncaught exception that ends the process mid-start-up.
  let lost: Error | undefined;
  client.on("error", (error) => {
    lost ??= error;
  });
  const run = async (sql: string, params?: unknown[]) => {
    try {
      return await client.query(sql, params);
    } catch (error) {
      throw lost ? new Error(`the connection to the database was lost while migrating (${lost.message})`) : error;
    }
  };
  await client.connect();
  try {
    await run("SELECT pg_advisory_lock($1::bigint)", [MIGRATION_LOCK]);
    return await fn({
      exec: async (sql) => {
        await run(sql);
      },
      query: async <R,>(sql: string, params: unknown[] = []) => (await run(sql, params)).rows as R[],
    });
  } finally {
    // Ending the session releases the lock even if the unlock is never sent.
    await client.end().catch(() => undefined);
  }
}
