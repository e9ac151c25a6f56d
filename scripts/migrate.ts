// npm run db:migrate — apply pending migrations to DATABASE_URL, or the embedded database.
import { openDatabase } from "../lib/db/database.ts";
import { migrate } from "../lib/db/migrate.ts";

async function main() {
  const database = await openDatabase({ url: process.env.DATABASE_URL || undefined, migrate: false });
  try {
    const applied = await migrate(database.sql);
    console.log(applied.length ? `applied ${applied.length} migration(s): ${applied.map((m) => m.name).join(", ")}` : "database is up to date");
  } finally {
    await database.close();
  }
}

main().catch((error) => {
  console.error(`migration failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
