import { defineConfig } from "@playwright/test";

/**
 * End-to-end tests drive the production build (`next build` first; `npm run e2e` does both)
 * with Debian's Chromium — no browser is ever downloaded. The global setup starts
 * the built server (scripts/server.mjs, as `npm start` runs it) on a free port with a fresh embedded database and exports its address.
 */
export default defineConfig({
  testDir: "e2e",
  globalSetup: "./e2e/global-setup.ts",
  outputDir: "e2e/artifacts/test-results",
  timeout: 300_000,
  expect: { timeout: 20_000 },
  workers: 1,
  fullyParallel: false,
  retries: 0,
  reporter: [["list"]],
  use: {
    browserName: "chromium",
    baseURL: process.env.E2E_BASE_URL,
    viewport: { width: 1280, height: 900 },
    screenshot: "only-on-failure",
    trace: "retain-on-failure",
    launchOptions: {
      executablePath: process.env.E2E_CHROMIUM ?? "/usr/bin/chromium",
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
});
