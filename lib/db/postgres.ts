import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient } from "./generated/client.ts";
import type { Database } from "./database.ts";

/** A PostgreSQL ≥ 15 server with pgvector, via node-postgres. */
export async function openPostgres(connectionString: string): Promise<Database> {
  const pool = new pg.Pool({ connectionString, max: Number(process.env.ENGRAM_DB_POOL_SIZE ?? 10) });
  // Prisma's defaults (2 s to get a connection, 5 s per transaction) turn a burst of writes that
  // queue on one row or advisory lock into 500s once the pool is busy; wait longer before giving up.
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool), transactionOptions: { maxWait: 10_000, timeout: 20_000 } });
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
    const next = new pg.Client({ connectionString });
    next.on("notification", (message) => {
      if (message.channel === channel && message.payload !== undefined) onPayload(message.payload);
    });
    next.on("error", (error) => {
      console.error(`[engram] LISTEN ${channel}: connection lost; reconnecting`, error.message);
      void next.end().catch(() => undefined);
      if (client === next) client = undefined;
      if (!stopped) setTimeout(() => void reconnect(), 1000).unref();
    });
    await next.connect();
    await next.query(`LISTEN "${channel.replaceAll('"', "")}"`);
    if (stopped) await next.end();
    else client = next;
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
