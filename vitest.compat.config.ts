import { defineConfig } from "vitest/config";

/**
 * `npm run test:compat` — Memax's own CLI and SDK against Engram's production build
 * (run `npm run build` first). Each test file starts its own server on a fresh embedded
 * database; the global setup compiles the Memax clients (npm registry only) once.
 */
export default defineConfig({
  resolve: { alias: { "@": import.meta.dirname } },
  test: {
    include: ["tests/compat/**/*.test.ts"],
    globalSetup: ["tests/compat/support/global-setup.ts"],
    environment: "node",
    testTimeout: 60_000,
    hookTimeout: 180_000,
    pool: "forks",
    maxWorkers: Number(process.env.ENGRAM_COMPAT_WORKERS ?? 2),
    // Two servers run at once on CI's two cores: one model thread each.
    env: { ENGRAM_EMBED_THREADS: process.env.ENGRAM_EMBED_THREADS ?? "1" },
  },
});
