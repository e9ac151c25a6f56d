import { existsSync } from "node:fs";
import path from "node:path";
import { ensureMemaxClients } from "../../support/memax-build.ts";

const root = path.resolve(import.meta.dirname, "..", "..", "..");

/**
 * Compiles Memax's CLI and SDK once (their own build script: npm registry only; it reuses an
 * earlier build) and checks that Engram's production build exists.
 */
export default async function setup({ provide }: { provide: (key: string, value: string) => void }) {
  if (!existsSync(path.join(root, ".next", "BUILD_ID"))) {
    throw new Error("No production build: run `npm run build` before `npm run test:compat`");
  }
  // The same build as `npm test`'s (memax-build.ts): a compat run and a test run at once share it safely.
  const { cli, sdk } = ensureMemaxClients();
  provide("memaxCli", cli);
  provide("memaxSdk", sdk);
}

declare module "vitest" {
  export interface ProvidedContext {
    memaxCli: string;
    memaxSdk: string;
  }
}
