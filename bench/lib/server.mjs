// Shared by the benchmarks: start the built server on a fresh embedded
// database, wait for health, create a user through the admin bootstrap.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

export const root = path.resolve(import.meta.dirname, "..", "..");

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index];
}

export function summarize(latencies) {
  const sorted = [...latencies].sort((a, b) => a - b);
  return { count: sorted.length, p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99), max: sorted.at(-1) };
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

/** Starts the built server as `npm start` runs it (scripts/server.mjs, which also compresses); never builds. */
export async function startServer({ env = {}, port: fixedPort } = {}) {
  if (!existsSync(path.join(root, ".next", "BUILD_ID"))) {
    throw new Error("No production build: run `npm run build` first (benchmarks never build).");
  }
  const dataDir = mkdtempSync(path.join(tmpdir(), "engram-bench-"));
  const port = fixedPort ?? (await freePort());
  const adminToken = "bench-admin-token-at-least-32-characters";
  const started = performance.now();
  const child = spawn(process.execPath, [path.join(root, "scripts", "server.mjs")], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      HOSTNAME: "127.0.0.1",
      ENGRAM_DATA_DIR: dataDir,
      ENGRAM_ADMIN_TOKEN: adminToken,
      ENGRAM_RATE_LIMIT_REGULAR: "1000000000",
      ENGRAM_RATE_LIMIT_HEAVY: "1000000000",
      ENGRAM_RATE_LIMIT_LIGHT: "1000000000",
      NODE_ENV: "production",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited early:\n${log}`);
    try {
      const res = await fetch(`${base}/v1/health`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`server not healthy after 60 s:\n${log}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  const coldStartMs = performance.now() - started;
  const res = await fetch(`${base}/v1/admin/users`, {
    method: "POST",
    headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
    body: JSON.stringify({ email: "bench@example.test", name: "Bench" }),
  });
  const { data } = await res.json();
  return {
    base,
    port,
    coldStartMs,
    apiKey: data.api_key,
    hubId: data.personal_hub_id,
    log: () => log,
    async stop() {
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
