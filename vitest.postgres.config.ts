import { defineConfig, mergeConfig } from "vitest/config";
import base from "./vitest.config.ts";

/**
 * `npm run test:postgres` — the suite of `npm test` against a real PostgreSQL server instead of
 * PGlite: the global setup starts `pg-server` (or uses ENGRAM_TEST_POSTGRES_URL) and migrates one
 * template database; every test database is a copy of it (tests/support/postgres.ts).
 */
process.env.ENGRAM_TEST_DATABASE = "postgres";

export default mergeConfig(
  base,
  defineConfig({
    test: {
      env: { ENGRAM_TEST_DATABASE: "postgres" },
      // PGlite's own machinery, nothing a server runs: the maintenance that stands in for the
      // autovacuum PGlite lacks (a server has its own, which would race the tests' "not analysed
      // yet" and "no dead rows" checks), and PGlite served over a socket (the same in both runs).
      exclude: ["tests/embedded-maintenance.test.ts", "tests/embedded-maintenance-stop.test.ts", "tests/embedded-statistics.test.ts", "tests/pglite-socket.test.ts"],
    },
  }),
);
