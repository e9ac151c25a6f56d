import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { PGlite, type QueryOptions, type Transaction } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "./generated/client.ts";
import { backgroundSharePercent, isBackgroundWork } from "./background-work.ts";
import { dataDirLock } from "./data-dir-lock.ts";
import { pipelinable, pipelinedStatement } from "./pglite-pipeline.ts";
import type { Database } from "./database.ts";
import { StatementScheduler } from "./statement-scheduler.ts";

type ParserTable = PGlite["parsers"];

/** Embedded PostgreSQL (WASM) with pgvector; one instance per process and directory. */
export async function openPglite(dataDir: string, template?: Blob): Promise<Database> {
  let release = () => {};
  if (!dataDir.startsWith("memory://")) {
    mkdirSync(dataDir, { recursive: true });
    release = dataDirLock(dataDir);
    process.once("exit", release);
    // First start on an empty directory: begin from the build's migrated snapshot instead of initdb.
    if (!template && !existsSync(path.join(dataDir, "PG_VERSION"))) template = (await import("./pglite-template.ts")).readBuildTemplate();
  }
  const pg = await PGlite.create(dataDir, { extensions: { vector }, ...(template && { loadDataDir: template }) }).catch((error: unknown) => {
    release();
    throw error;
  });
  const scheduler = new StatementScheduler({
    backgroundShare: backgroundSharePercent() / 100,
    foregroundWindowMs: 1000,
    lingerMs: 2,
    maxBackgroundWaitMs: 1000,
  });
  const scheduled = scheduledPglite(pg, scheduler);
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(scheduled) });
  return {
    kind: "pglite",
    prisma,
    sql: {
      exec: async (sql) => {
        await scheduled.exec(sql);
      },
      query: async <T,>(sql: string, params: unknown[] = []) => (await scheduled.query<T>(sql, params)).rows,
    },
    scheduler,
    // In-process: PGlite delivers a NOTIFY to its listeners when the notifying transaction commits.
    listen: async (channel, onPayload) => pg.listen(channel, onPayload),
    dump: async () => (await pg.dumpDataDir("none")) as Blob,
    close: async () => {
      await prisma.$disconnect();
      await pg.close();
      release();
      process.off("exit", release);
    },
  };
}

/**
 * The PGlite instance as Prisma and lib/recall see it: every statement and transaction takes its
 * turn through the scheduler (foreground before background), then PGlite's own queue, now empty.
 */
function scheduledPglite(pg: PGlite, scheduler: StatementScheduler): PGlite {
  const turn =
    <A extends unknown[], R>(method: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      scheduler.run(isBackgroundWork(), () => method.apply(pg, args));
  const withParsers = mergedParsersQuery(pg);
  const transaction = (<T,>(callback: (tx: Transaction) => Promise<T>) =>
    pg.transaction((tx) => callback(overriding(tx, { query: withParsers(tx, true) })))) as PGlite["transaction"];
  return overriding(pg, { query: turn(withParsers(pg, false)) as PGlite["query"], exec: turn(pg.exec), transaction: turn(transaction) as PGlite["transaction"] });
}

/** `target` with some methods replaced. PGlite's methods use private fields: the others are called on the instance, never on the proxy. */
function overriding<T extends object>(target: T, overrides: Partial<T>): T {
  return new Proxy(target, {
    get(instance, property) {
      if (property in overrides) return overrides[property as keyof T];
      const value: unknown = Reflect.get(instance, property, instance);
      return typeof value === "function" ? value.bind(instance) : value;
    },
  });
}

/**
 * Prisma's adapter passes its own type parsers with every statement, and PGlite merges them into
 * its own table of ~320 (one per array type) for every result: `{ ...own, ...given }` took
 * ~0.19 ms, about 1.5 ms of a create's ~10 statements. The merged table is built once per pair
 * and put in PGlite's place for that one statement instead. Only inside a scheduler turn: nothing
 * else uses the connection until it ends, so no other statement sees the swapped table. One
 * difference: PGlite's array parsers look their element's parser up in the table in place, so an
 * array whose element type the adapter overrides but not the array type (only timetz[], which the
 * schema does not use) now gets the adapter's element parser, as its scalars do.
 *
 * Every statement with parameters then runs as one batch of protocol messages (pglite-pipeline.ts),
 * with `inTransaction` telling it which of PGlite's locks its caller already holds.
 */
function mergedParsersQuery(pg: PGlite) {
  const cache = new WeakMap<object, WeakMap<object, ParserTable>>();
  const pipelined = { outside: pipelinedStatement(pg, false), inside: pipelinedStatement(pg, true) };
  return (queryable: Pick<Transaction, "query" | "closed">, inTransaction: boolean): Transaction["query"] => {
    // A closed transaction (or instance) is left to PGlite's own query, which refuses it.
    const run = (sql: string, params: unknown[] | undefined, options: QueryOptions | undefined) =>
      pipelinable(options) && !queryable.closed
        ? (inTransaction ? pipelined.inside : pipelined.outside)(sql, params, options, pg.parsers)
        : queryable.query(sql, params, options);
    return (async (sql: string, params?: unknown[], options?: QueryOptions) => {
      const given = options?.parsers;
      if (!given) return run(sql, params, options);
      const own = pg.parsers;
      let byGiven = cache.get(own);
      if (!byGiven) cache.set(own, (byGiven = new WeakMap()));
      let merged = byGiven.get(given);
      if (!merged) byGiven.set(given, (merged = { ...own, ...given }));
      pg.parsers = merged;
      try {
        return await run(sql, params, { ...options, parsers: undefined });
      } finally {
        pg.parsers = own;
      }
    }) as Transaction["query"];
  };
}
