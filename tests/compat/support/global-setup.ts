import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..", "..", "..");

/** `shared/clients/memax` beside the repository (or any parent of it), or MEMAX_CLIENTS_DIR. */
function clientsDir(): string {
  if (process.env.MEMAX_CLIENTS_DIR) return path.resolve(process.env.MEMAX_CLIENTS_DIR);
  for (let dir = root; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "shared", "clients", "memax");
    if (existsSync(path.join(candidate, "build"))) return candidate;
    if (path.dirname(dir) === dir) break;
  }
  throw new Error("Memax's clients were not found: put them at ../shared/clients/memax or set MEMAX_CLIENTS_DIR");
}

/**
 * Compiles Memax's CLI and SDK once (their own build script: npm registry only; it reuses an
 * earlier build) and checks that Engram's production build exists.
 */
export default async function setup({ provide }: { provide: (key: string, value: string) => void }) {
  if (!existsSync(path.join(root, ".next", "BUILD_ID"))) {
    throw new Error("No production build: run `npm run build` before `npm run test:compat`");
  }
  const out = process.env.MEMAX_CLIENT_OUT ?? "/tmp/memax-client";
  const build = spawnSync("bash", [path.join(clientsDir(), "build"), out], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const cli = build.stdout.trim().split("\n").pop() ?? "";
  if (build.status !== 0 || !existsSync(cli)) throw new Error(`Building Memax's clients failed (status ${build.status}): ${build.stdout}`);
  const sdk = path.join(path.dirname(cli), "..", "..", "sdk", "dist", "index.js");
  if (!existsSync(sdk)) throw new Error(`Memax's SDK was not built at ${sdk}`);
  provide("memaxCli", cli);
  provide("memaxSdk", path.resolve(sdk));
}

declare module "vitest" {
  export interface ProvidedContext {
    memaxCli: string;
    memaxSdk: string;
  }
}
