// npm run db:migrate — apply pending migrations to DATABASE_URL, or the embedded database.
import { applyMigrations, openDatabase } from "../lib/db/database.ts";

async function main() {
  const url = process.env.DATABASE_URL || undefined;
  const database = await openDatabase({ url, migrate: false });
  try {
    const applied = await applyMigrations(database, url);
    console.log(applied.length ? `applied ${applied.length} migration(s): ${applied.map((m) => m.name).join(", ")}` : "database is up to date");
  } finally {
    await database.close();
  }
}

main().catch((error) => {
  console.error(`migration failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
