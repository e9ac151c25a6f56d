import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "./generated/client.ts";
import type { Database } from "./database.ts";

/** Embedded PostgreSQL (WASM) with pgvector; one instance per process and directory. */
export async function openPglite(dataDir: string, template?: Blob): Promise<Database> {
  if (!dataDir.startsWith("memory://")) {
    mkdirSync(dataDir, { recursive: true });
    // First start on an empty directory: begin from the build's migrated snapshot instead of initdb.
    if (!template && !existsSync(path.join(dataDir, "PG_VERSION"))) template = (await import("./pglite-template.ts")).readBuildTemplate();
  }
  const pg = await PGlite.create(dataDir, { extensions: { vector }, ...(template && { loadDataDir: template }) });
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(pg) });
  return {
    kind: "pglite",
    prisma,
    sql: {
      exec: async (sql) => {
        await pg.exec(sql);
      },
      query: async <T,>(sql: string, params: unknown[] = []) => (await pg.query<T>(sql, params)).rows,
    },
    // In-process: PGlite delivers a NOTIFY to its listeners when the notifying transaction commits.
    listen: async (channel, onPayload) => pg.listen(channel, onPayload),
    dump: async () => (await pg.dumpDataDir("none")) as Blob,
    close: async () => {
      await prisma.$disconnect();
      await pg.close();
    },
  };
}
