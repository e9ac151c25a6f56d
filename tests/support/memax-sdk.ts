import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { dispatch } from "./router.ts";

const root = path.resolve(import.meta.dirname, "..", "..");

/**
 * Memax's SDK, built once by its own script from its sources (`../shared/clients/memax`, or
 * MEMAX_CLIENTS_DIR); an earlier build is reused. Returns the SDK's entry file. The global setup
 * calls it before any test starts, so a missing checkout of the clients is one clear line.
 */
export function ensureMemaxSdk(): string {
  const out = process.env.MEMAX_CLIENT_OUT ?? "/tmp/memax-client";
  const sdk = path.join(out, "packages", "sdk", "dist", "index.js");
  if (existsSync(sdk)) return sdk;
  let clients = process.env.MEMAX_CLIENTS_DIR;
  for (let dir = root; !clients; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "shared", "clients", "memax");
    if (existsSync(path.join(candidate, "build"))) clients = candidate;
    if (path.dirname(dir) === dir) break;
  }
  if (!clients) throw new Error("Memax's clients were not found: put them at ../shared/clients/memax or set MEMAX_CLIENTS_DIR");
  const build = spawnSync("bash", [path.join(clients, "build"), out], { encoding: "utf8" });
  if (build.status !== 0 || !existsSync(sdk)) throw new Error(`Building Memax's clients failed: ${build.stdout}${build.stderr}`);
  return sdk;
}

export async function loadMemaxSdk(): Promise<any> {
  return import(ensureMemaxSdk());
}

/** A fetch that hands requests to the route handlers (what the SDK talks to in these tests). */
export const routeFetch: typeof fetch = async (input, init) => {
  const req = input instanceof Request ? input : new Request(String(input), init);
  return dispatch(req);
};
