import path from "node:path";
import type { ProvidedContext } from "vitest";
import { ensurePgliteTemplate, migrationsDigest } from "../../lib/db/pglite-template.ts";
// @ts-expect-error -- plain ESM scripts shared with `npm run models`; no type declarations
import { Fail, prepareModels } from "../../scripts/models.mjs";
// @ts-expect-error -- plain ESM script
import { ensureRedisServer } from "../../scripts/redis-server.mjs";
import { ensureMemaxSdk } from "./memax-sdk.ts";
import { dropRunDatabases, ensurePostgresServer, ensurePostgresTemplate, postgresMode, type TestPostgres } from "./postgres.ts";

const say = (line: string) => process.stdout.write(`[npm test] ${line}\n`);

/**
 * Everything the suite needs, prepared once and cached, so a fresh clone passes `npm test` alone:
 * the local embedding model (the same code as `npm run models`), a redis-server for the Upstash
 * stand-in, Memax's SDK (the real client some tests drive), and one migrated database snapshot per migration set (initdb once, not per file).
 * What cannot be had stops the run here, in one line, before any test starts.
 */
export default async function setup({ provide }: { provide: <K extends keyof ProvidedContext>(key: K, value: ProvidedContext[K]) => void }) {
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
  if (!postgresMode()) return;
  // `npm run test:postgres`: a real server and its migrated template; each harness copies the template.
  let postgres: TestPostgres;
  try {
    postgres = await ensurePostgresTemplate(ensurePostgresServer(say), say);
  } catch (error) {
    process.stderr.write(`\n[npm test] cannot start: ${(error as Error).message}\n\n`);
    throw new Error(`npm run test:postgres cannot start: ${(error as Error).message}`);
  }
  provide("postgres", postgres);
  return async () => {
    const left = await dropRunDatabases(postgres);
    if (left) say(`postgres: dropped ${left} test database(s) left open`);
  };
}

declare module "vitest" {
  export interface ProvidedContext {
    dbTemplate: string;
    redisServer: string;
    /** Only under `npm run test:postgres`. */
    postgres?: TestPostgres;
  }
}
