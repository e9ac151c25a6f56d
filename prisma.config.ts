import { defineConfig } from "prisma/config";

// The CLI only needs a URL for `prisma migrate deploy` against a real server;
// the app itself picks its database in lib/db.
export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: { url: process.env.DATABASE_URL ?? "postgresql://localhost:5432/engram" },
});
