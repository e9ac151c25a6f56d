import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, expect, test } from "vitest";
import { ensureMemaxClients } from "./support/memax-build.ts";

// Two test runs at once (the PGlite and PostgreSQL suites, or two worktrees) both built Memax's
// clients into the same directory, whose build script starts with `rm -rf` of it: one run deleted the
// other's half-built copy, and a directory left with the CLI but no SDK was reused by every later run.

const tsx = path.resolve(import.meta.dirname, "..", "node_modules", ".bin", "tsx");
const builder = pathToFileURL(path.join(import.meta.dirname, "support", "memax-build.ts")).href;
const scratch = mkdtempSync(path.join(tmpdir(), "engram-memax-build-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** ensureMemaxClients in a process of its own, as each test run's global setup calls it. */
function buildInChild(out: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(tsx, ["-e", `import(${JSON.stringify(builder)}).then((m) => console.log(JSON.stringify(m.ensureMemaxClients())))`], {
      env: { ...process.env, MEMAX_CLIENT_OUT: out },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

// Two real builds (npm install from the local cache) run at once: about 50 s on two cores, hence the timeout.
test("two builds at once both end with a usable SDK and CLI, replacing a copy left without its SDK", { timeout: 300_000 }, async () => {
  const out = path.join(scratch, "memax-client");
  // What a build cut short left: the CLI's entry file, no SDK.
  mkdirSync(path.join(out, "packages", "cli", "dist"), { recursive: true });
  writeFileSync(path.join(out, "packages", "cli", "dist", "index.js"), "");
  const runs = await Promise.all([buildInChild(out), buildInChild(out)]);
  for (const run of runs) {
    expect(run.status, run.stderr).toBe(0);
    const { sdk, cli } = JSON.parse(run.stdout.trim().split("\n").pop()!) as { sdk: string; cli: string };
    expect(existsSync(cli)).toBe(true);
    const { Memax } = (await import(pathToFileURL(sdk).href)) as { Memax: unknown };
    expect(typeof Memax).toBe("function");
  }
  expect(existsSync(path.join(out, "packages", "sdk", "dist", "index.js"))).toBe(true);
  // No half-built copies left beside it.
  expect(readdirSync(scratch)).toEqual(["memax-client"]);
});

/** A stand-in for Memax's clients whose build script writes `label` into both entry files and stamps the copy, as the real one does. */
function quickClients(label: string): string {
  const clients = mkdtempSync(path.join(scratch, "clients-"));
  const script = path.join(clients, "build");
  writeFileSync(
    script,
    `set -e; out="$1"; rm -rf "$out"; for p in sdk cli; do mkdir -p "$out/packages/$p/dist"; echo '${label}' > "$out/packages/$p/dist/index.js"; done; touch "$out/.stamp"\n`,
  );
  return clients;
}

function withClients<T>(clients: string, run: () => T): T {
  const saved = process.env.MEMAX_CLIENTS_DIR;
  process.env.MEMAX_CLIENTS_DIR = clients;
  try {
    return run();
  } finally {
    if (saved === undefined) delete process.env.MEMAX_CLIENTS_DIR;
    else process.env.MEMAX_CLIENTS_DIR = saved;
  }
}

// The clients' build script pins Memax's commit; the compat setup ran it every run, and it rebuilds when
// its copy's .stamp is older than itself. Reusing any complete copy kept running the old commit's clients.
test("a complete copy older than the clients' build script is built again; one newer is reused", () => {
  const out = path.join(scratch, "stale-client");
  const clients = quickClients("new commit");
  const old = withClients(quickClients("old commit"), () => ensureMemaxClients(out));
  expect(readFileSync(old.sdk, "utf8").trim()).toBe("old commit");
  // The build script changed (a new commit pinned) after that copy was stamped.
  const hourAgo = new Date(Date.now() - 3_600_000);
  utimesSync(path.join(out, ".stamp"), hourAgo, hourAgo);
  const built = withClients(clients, () => ensureMemaxClients(out));
  expect(readFileSync(built.sdk, "utf8").trim()).toBe("new commit");
  expect(readFileSync(built.cli, "utf8").trim()).toBe("new commit");
  // Stamped after the script: reused as it is, not built again.
  writeFileSync(built.sdk, "kept");
  expect(readFileSync(withClients(clients, () => ensureMemaxClients(out)).sdk, "utf8")).toBe("kept");
  expect(readdirSync(scratch).filter((name) => name.startsWith("stale-client"))).toEqual(["stale-client"]);
});
