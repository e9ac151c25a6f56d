import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
export const ARTIFACTS = path.join(root, "e2e", "artifacts");

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

async function waitForHealth(url: string, server: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`the server exited with ${server.exitCode}; see e2e/artifacts/server.log`);
    try {
      const res = await fetch(`${url}/v1/health`);
      if (res.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`server did not become healthy within ${timeoutMs} ms; see e2e/artifacts/server.log`);
}

/** Starts the production server on a free port with a throwaway data directory. */
export default async function globalSetup(): Promise<() => Promise<void>> {
  if (!existsSync(path.join(root, ".next", "BUILD_ID"))) {
    throw new Error("No production build: run `npm run e2e` (builds first) or `npm run build`");
  }
  mkdirSync(ARTIFACTS, { recursive: true });
  const dataDir = mkdtempSync(path.join(tmpdir(), "engram-e2e-"));
  // E2E_PORT pins the port (e.g. to stay inside a range reserved on a shared machine).
  const port = process.env.E2E_PORT ? Number(process.env.E2E_PORT) : await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = createWriteStream(path.join(ARTIFACTS, "server.log"));
  // No NEXTAUTH_URL / NEXTAUTH_SECRET / ENGRAM_SECRET: the zero-configuration start is what is tested.
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: "production", ENGRAM_DATA_DIR: dataDir, PORT: String(port) };
  for (const name of ["NEXTAUTH_URL", "NEXTAUTH_SECRET", "AUTH_SECRET", "ENGRAM_SECRET", "DATABASE_URL", "ENGRAM_PUBLIC_URL", "ENGRAM_ALLOW_SIGNUP"]) delete env[name];
  // Seeding 1,000 memories for the load-time measurement must not trip the per-minute caps.
  env.ENGRAM_RATE_LIMIT_REGULAR = "100000";
  // GitHub sign-in is offered (with credentials GitHub never sees: the browser's trip there is intercepted).
  env.GITHUB_CLIENT_ID = "e2e-github-client";
  env.GITHUB_CLIENT_SECRET = "e2e-github-secret";
  // E-mail code sign-in is offered with no mail server: the code comes back in the API's answer (a development server's setting).
  env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
  delete env.SMTP_URL;
  // The server `npm start` runs (scripts/server.mjs: Next's handler behind our HTTP server, which compresses).
  const server = spawn(process.execPath, [path.join(root, "scripts", "server.mjs")], {
    cwd: root,
    env: { ...env, PORT: String(port), HOSTNAME: "127.0.0.1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  server.stdout!.pipe(log);
  server.stderr!.pipe(log);
  await waitForHealth(url, server, 120_000);
  process.env.E2E_BASE_URL = url;
  return async () => {
    server.kill("SIGTERM");
    await new Promise((r) => (server.exitCode !== null ? r(undefined) : server.once("exit", r)));
    rmSync(dataDir, { recursive: true, force: true });
  };
}
