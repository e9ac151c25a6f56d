import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient } from "./generated/client.ts";
import type { Database } from "./database.ts";

/** A PostgreSQL ≥ 15 server with pgvector, via node-postgres. */
export async function openPostgres(connectionString: string): Promise<Database> {
  const pool = new pg.Pool({ connectionString, max: Number(process.env.ENGRAM_DB_POOL_SIZE ?? 10) });
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool) });
  return {
    kind: "postgres",
    prisma,
    sql: {
      exec: async (sql) => {
        await pool.query(sql);
      },
      query: async <T,>(sql: string, params: unknown[] = []) => (await pool.query(sql, params)).rows as T[],
    },
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}
