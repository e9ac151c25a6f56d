import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { PGlite, type QueryOptions, type Transaction } from "@electric-sql/pglite";

type ParserTable = PGlite["parsers"];
import { vector } from "@electric-sql/pglite-pgvector";
import { PrismaPGlite } from "pglite-prisma-adapter";
import { PrismaClient } from "./generated/client.ts";
import { backgroundSharePercent, isBackgroundWork } from "./background-work.ts";
import { dataDirLock } from "./data-dir-lock.ts";
import type { Database } from "./database.ts";
import { StatementScheduler } from "./statement-scheduler.ts";

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
  const parsed = withMergedParsers(pg);
  const query = ((sql: string, params?: unknown[], options?: QueryOptions) => parsed(options, (merged) => pg.query(sql, params, merged))) as PGlite["query"];
  const transaction = (<T,>(callback: (tx: Transaction) => Promise<T>) =>
    pg.transaction((tx) =>
      callback(
        new Proxy(tx, {
          get(target, property) {
            if (property === "query") return ((sql: string, params?: unknown[], options?: QueryOptions) => parsed(options, (merged) => target.query(sql, params, merged))) as Transaction["query"];
            const value: unknown = Reflect.get(target, property, target);
            return typeof value === "function" ? value.bind(target) : value;
          },
        }),
      ),
    )) as PGlite["transaction"];
  const wrapped: Partial<PGlite> = { query: turn(query) as PGlite["query"], exec: turn(pg.exec), transaction: turn(transaction) as PGlite["transaction"] };
  return new Proxy(pg, {
    get(target, property) {
      if (property in wrapped) return wrapped[property as keyof typeof wrapped];
      const value: unknown = Reflect.get(target, property, target);
      // PGlite's methods use private fields: call them on the instance, never on the proxy.
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * Prisma's adapter passes its own type parsers with every statement, and PGlite merges them into
 * its own table of ~320 (one per array type) for every result: `{ ...own, ...given }` took
 * ~0.19 ms, about 1.5 ms of a create's ~10 statements. The merged table is built once per pair
 * and put in PGlite's place for that one statement instead. Only inside a scheduler turn: nothing
 * else uses the connection until it ends, so no other statement sees the swapped table.
 */
function withMergedParsers(pg: PGlite) {
  const cache = new WeakMap<object, WeakMap<object, ParserTable>>();
  return async <R,>(options: QueryOptions | undefined, run: (options: QueryOptions | undefined) => Promise<R>): Promise<R> => {
    const given = options?.parsers;
    if (!given) return run(options);
    const own = pg.parsers;
    let byGiven = cache.get(own);
    if (!byGiven) cache.set(own, (byGiven = new WeakMap()));
    let merged = byGiven.get(given);
    if (!merged) byGiven.set(given, (merged = { ...own, ...given }));
    pg.parsers = merged;
    try {
      return await run({ ...options, parsers: undefined });
    } finally {
      pg.parsers = own;
    }
  };
}
