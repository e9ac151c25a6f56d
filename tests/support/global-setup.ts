import { createHash } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { openDatabase } from "../../lib/db/database.ts";
import { listMigrations } from "../../lib/db/migrate.ts";

/**
 * Creating a PGlite database runs initdb (~3 s); loading a snapshot takes a
 * fraction of that. Build one migrated snapshot per migration set and let
 * every test database start from it.
 */
export default async function setup({ provide }: { provide: (key: string, value: string) => void }) {
  const digest = createHash("sha256")
    .update(listMigrations().map((m) => `${m.name}:${m.checksum}`).join("\n"))
    .digest("hex")
    .slice(0, 16);
  const dir = path.join(process.cwd(), "node_modules", ".cache", "engram-tests");
  const file = path.join(dir, `template-${digest}.tar`);
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true });
    const db = await openDatabase({ dataDir: "memory://" });
    const blob = await db.dump!();
    writeFileSync(`${file}.tmp`, Buffer.from(await blob.arrayBuffer()));
    await db.close();
    (await import("node:fs")).renameSync(`${file}.tmp`, file);
  }
  provide("dbTemplate", file);
}

declare module "vitest" {
  export interface ProvidedContext {
    dbTemplate: string;
  }
}
