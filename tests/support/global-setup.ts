import path from "node:path";
import { ensurePgliteTemplate, migrationsDigest } from "../../lib/db/pglite-template.ts";
// @ts-expect-error -- plain ESM scripts shared with `npm run models`; no type declarations
import { Fail, prepareModels } from "../../scripts/models.mjs";
// @ts-expect-error -- plain ESM script
import { ensureRedisServer } from "../../scripts/redis-server.mjs";
import { ensureMemaxSdk } from "./memax-sdk.ts";

const say = (line: string) => process.stdout.write(`[npm test] ${line}\n`);

/**
 * Everything the suite needs, prepared once and cached, so a fresh clone passes `npm test` alone:
 * the local embedding model (the same code as `npm run models`), a redis-server for the Upstash
 * stand-in, Memax's SDK (the real client some tests drive), and one migrated database snapshot per migration set (initdb once, not per file).
 * What cannot be had stops the run here, in one line, before any test starts.
 */
export default async function setup({ provide }: { provide: (key: string, value: string) => void }) {
  try {
    await prepareModels({ logLine: say });
    provide("redisServer", ensureRedisServer({ logLine: say }) as string);
    say(`memax sdk: ${ensureMemaxSdk()}`);
  } catch (error) {
    const message = error instanceof Fail ? (error as Error).message : String((error as Error)?.stack ?? error);
    process.stderr.write(`\n[npm test] cannot start: ${message}\n\n`);
    throw new Error(`npm test cannot start: ${message}`);
  }
  const file = path.join(process.cwd(), "node_modules", ".cache", "engram-tests", `template-${migrationsDigest()}.tar`);
  provide("dbTemplate", await ensurePgliteTemplate(file));
}

declare module "vitest" {
  export interface ProvidedContext {
    dbTemplate: string;
    redisServer: string;
  }
}
