import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { alias: { "@": import.meta.dirname } },
  test: {
    include: ["tests/**/*.test.ts"],
    // The real-client tests need a production build: `npm run test:compat` (vitest.compat.config.ts).
    exclude: ["tests/compat/**", "node_modules/**"],
    globalSetup: ["tests/support/global-setup.ts"],
    environment: "node",
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: 2,
    // Two test files run at once on CI's two cores: one model thread each (and in the servers they start).
    env: { ENGRAM_EMBED_THREADS: process.env.ENGRAM_EMBED_THREADS ?? "1" },
  },
});
