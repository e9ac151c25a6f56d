import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { openDatabase, type Database } from "@/lib/db/database.ts";

/**
 * A fresh, migrated database for one benchmark phase, and how to get rid of it: a new database on
 * the PostgreSQL server of DATABASE_URL (dropped afterwards), or else an embedded one in a
 * temporary directory (`dataDir` puts it somewhere else and keeps it).
 */
export async function freshDatabase(options: { prefix: string; dataDir?: string }): Promise<{ database: Database; label: string; drop: () => Promise<void> }> {
  const url = process.env.DATABASE_URL;
  if (!url) {
    const dir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), `engram-${options.prefix}-`));
    const database = await openDatabase({ dataDir: dir });
    return { database, label: "embedded (PGlite)", drop: async () => (options.dataDir ? undefined : rmSync(dir, { recursive: true, force: true })) };
  }
  const name = `engram_${options.prefix.replace(/\W/g, "_")}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const target = new URL(url);
  target.pathname = `/${name}`;
  const database = await openDatabase({ url: target.toString() });
  return {
    database,
    label: "PostgreSQL",
    drop: async () => {
      const again = new pg.Client({ connectionString: url });
      await again.connect();
      await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await again.end();
    },
  };
}
