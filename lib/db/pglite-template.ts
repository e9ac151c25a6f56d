import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { listMigrations } from "./migrate.ts";

/**
 * PGlite's initdb is slow (3 s in memory, far more on disk); loading a
 * snapshot of an already migrated database takes a fraction of that. The
 * build writes one such snapshot, keyed by the migration set, so a first
 * start on an empty data directory is quick; tests start every database from one.
 */
export function migrationsDigest(): string {
  return createHash("sha256")
    .update(listMigrations().map((m) => `${m.name}:${m.checksum}`).join("\n"))
    .digest("hex")
    .slice(0, 16);
}

export function buildTemplatePath(): string {
  return path.join(/*turbopackIgnore: true*/ process.cwd(), ".next", "engram", `pglite-${migrationsDigest()}.tar`);
}

/** Writes a migrated snapshot to `file` unless it exists; returns the path. */
export async function ensurePgliteTemplate(file = buildTemplatePath()): Promise<string> {
  if (existsSync(/*turbopackIgnore: true*/ file)) return file;
  const { openDatabase } = await import("./database.ts");
  const db = await openDatabase({ dataDir: "memory://" });
  try {
    const blob = await db.dump!();
    mkdirSync(/*turbopackIgnore: true*/ path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(/*turbopackIgnore: true*/ tmp, Buffer.from(await blob.arrayBuffer()));
    renameSync(/*turbopackIgnore: true*/ tmp, file);
  } finally {
    await db.close();
  }
  return file;
}

/** The build's snapshot for the current migrations, if there is one. */
export function readBuildTemplate(): Blob | undefined {
  const file = buildTemplatePath();
  return existsSync(/*turbopackIgnore: true*/ file) ? new Blob([readFileSync(/*turbopackIgnore: true*/ file)]) : undefined;
}
