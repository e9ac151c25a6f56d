import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { openDatabase, type Database } from "@/lib/db/database.ts";
// @ts-expect-error plain ESM helper without types
import { freshPostgresDatabase } from "./campaign.mjs";

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
  const created = (await freshPostgresDatabase(url, options.prefix.replace(/\W/g, "_"))) as { url: string; drop: () => Promise<void> };
  return { database: await openDatabase({ url: created.url }), label: "PostgreSQL", drop: created.drop };
}
