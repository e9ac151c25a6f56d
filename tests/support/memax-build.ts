import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..", "..");

/** Memax's clients' sources: MEMAX_CLIENTS_DIR, or `shared/clients/memax` beside the checkout or above it. */
export function memaxClientsDir(): string {
  let clients = process.env.MEMAX_CLIENTS_DIR && path.resolve(process.env.MEMAX_CLIENTS_DIR);
  for (let dir = root; !clients; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "shared", "clients", "memax");
    if (existsSync(path.join(candidate, "build"))) clients = candidate;
    if (path.dirname(dir) === dir) break;
  }
  if (!clients) throw new Error("Memax's clients were not found: put them at ../shared/clients/memax or set MEMAX_CLIENTS_DIR");
  return clients;
}

/** The entry files of a build in `dir`; a build counts as present only with both. */
function entries(dir: string): { sdk: string; cli: string } {
  return { sdk: path.join(dir, "packages", "sdk", "dist", "index.js"), cli: path.join(dir, "packages", "cli", "dist", "index.js") };
}

/** When `file` was last written, or undefined when it does not exist. */
const modified = (file: string) => statSync(file, { throwIfNoEntry: false })?.mtimeMs;

/**
 * Both entry files, and stamped after the clients' build script was last changed: the script pins
 * Memax's commit, and rebuilds a copy whose .stamp is older than itself (its `-nt` test). Any copy with
 * both files was reused, so a new pinned commit never reached the tests until /tmp was cleared.
 */
function complete(dir: string): boolean {
  if (!Object.values(entries(dir)).every((file) => existsSync(file))) return false;
  let sources: string;
  try {
    sources = memaxClientsDir();
  } catch {
    // A machine with a built copy but not the sources: nothing to judge it against, so it is used.
    return true;
  }
  const stamped = modified(path.join(dir, ".stamp"));
  const script = modified(path.join(sources, "build"));
  return stamped !== undefined && script !== undefined && stamped > script;
}

/**
 * Memax's SDK and CLI built by their own script into `out` (MEMAX_CLIENT_OUT, default
 * /tmp/memax-client), or an earlier complete build there reused (stamped after the script, as the
 * script itself decides). The script starts with `rm -rf` of its target, so two test runs building into `out` at once deleted each other's half-built copy, and
 * a copy left with the CLI but no SDK was reused by later runs (each side checked only its own file).
 * Each build now goes into a fresh directory beside `out` and is renamed into place whole; a run that
 * loses that race uses the winner's.
 */
export function ensureMemaxClients(out = process.env.MEMAX_CLIENT_OUT ?? "/tmp/memax-client"): { sdk: string; cli: string } {
  if (complete(out)) return entries(out);
  // The script made a missing parent itself; the fresh directory beside `out` needs it first.
  mkdirSync(path.dirname(out), { recursive: true });
  const fresh = mkdtempSync(`${out}.build-`);
  try {
    const build = spawnSync("bash", [path.join(memaxClientsDir(), "build"), fresh], { encoding: "utf8" });
    if (build.status !== 0 || !complete(fresh)) throw new Error(`Building Memax's clients failed: ${build.stdout}${build.stderr}`);
    if (!complete(out)) {
      // An incomplete copy is moved aside first (rename does not replace a non-empty directory). What
      // was moved may be another run's complete build, renamed in since the check: it goes back.
      if (existsSync(out)) {
        const stale = mkdtempSync(`${out}.stale-`);
        try {
          renameSync(out, path.join(stale, "old"));
          if (complete(path.join(stale, "old"))) renameSync(path.join(stale, "old"), out);
        } catch {
          // Moved or replaced by another run meanwhile.
        }
        rmSync(stale, { recursive: true, force: true });
      }
      try {
        renameSync(fresh, out);
      } catch (error) {
        // Another run's build got there first.
        if (!complete(out)) throw error;
      }
    }
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
  return entries(out);
}
