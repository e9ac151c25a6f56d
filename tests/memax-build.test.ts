import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, expect, test } from "vitest";

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
