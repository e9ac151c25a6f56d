import { parse, protocol, type PGlite, type QueryOptions, type Results } from "@electric-sql/pglite";
import { readResults, type DeliveredNotification } from "./pglite-results.ts";

type ParserTable = PGlite["parsers"];

/**
 * Statement texts one PGlite instance keeps prepared (the least recently used are closed first). A
 * prepared statement holds its parse tree and, after five runs, possibly a generic plan in the
 * backend's memory; 500 covers every text a running server uses many times (Prisma's and ours, a
 * chunk INSERT per chunk count) with room to spare.
 */
const PREPARED_STATEMENTS = 500;

/**
 * One statement with parameters in one call into the WASM backend, parsed once per text, where
 * PGlite's own `query` makes six calls (Parse, Describe statement, Bind, Describe portal, Execute,
 * Sync) and parses and analyses the text every time.
 *
 * PGlite describes every statement first only to learn its parameters' types, which choose how each
 * JavaScript value is written as text (a Date, an array, JSON, bytes). Those types depend on the
 * statement's text and the schema alone. So the first time a text runs, it is prepared under a name
 * of its own with PGlite's Parse and Describe (one call), and the types are remembered with the
 * name; every run then sends Bind, Describe portal, Execute and Sync as one batch. Measured on the
 * embedded database: a Prisma select of a memory by id 0.98 → 0.55 ms, of which ~0.1 ms is the
 * calls saved and the rest parsing and analysing the text again. Plans follow PostgreSQL's rules for
 * prepared statements (custom plans, then a generic one where it costs no more), as plpgsql's
 * statements inside our functions always have; a schema change re-plans them. The values are written
 * by PGlite's own serializers exactly as its `query` writes them. The reply is read from its raw
 * bytes into the result PGlite's `parseResults` would give (pglite-results.ts), which is cheaper
 * than PGlite's message parser. (A schema change at run time that changed a prepared text's
 * parameter types would not be seen; migrations run before the first statement.)
 *
 * `inTransaction`: the statement belongs to a transaction PGlite's `transaction()` opened (its
 * mutex is held), so only the query mutex is taken and the files are not synced after it, as PGlite
 * does for its own transaction statements. A prepared statement outlives the transaction it was
 * prepared in, whether that commits or rolls back.
 */
export function pipelinedStatement(pg: PGlite, inTransaction: boolean) {
  const prepared = preparedStatementsOf(pg);
  return async <T>(sql: string, params: unknown[] = [], options: QueryOptions | undefined, parsers: ParserTable): Promise<Results<T>> => {
    const run = async (): Promise<Results<T>> => {
      try {
        let statement = prepared.texts.get(sql);
        if (statement) {
          // Refreshed as the most recently used.
          prepared.texts.delete(sql);
          prepared.texts.set(sql, statement);
        } else {
          // First sight of this text: prepared and described in one call (closing the least recently used beyond the cap).
          const name = `engram_${++prepared.count}`;
          const closing: Uint8Array[] = [];
          if (prepared.texts.size >= PREPARED_STATEMENTS) {
            const [oldest, old] = prepared.texts.entries().next().value!;
            prepared.texts.delete(oldest);
            closing.push(serialize.close({ type: "S", name: old.name }));
          }
          try {
            const types = parse.parseDescribeStatementResults(
              await pg.execProtocolStream(concat(...closing, serialize.parse({ name, text: sql }), serialize.describe({ type: "S", name })), { syncToFs: false }),
            );
            prepared.texts.set(sql, (statement = { name, types }));
          } catch (error) {
            // A failed Parse must not leave the backend waiting for Sync.
            await pg.execProtocolStream(serialize.sync(), { syncToFs: false }).catch(() => undefined);
            throw error;
          }
        }
        const { name, types } = statement;
        let values: ParameterValue[];
        try {
          values = params.map((param, i) => parameterValue(pg, param, types[i]!, options));
        } catch (error) {
          // A value no serializer accepts: as after a failed Parse, the backend may be waiting for Sync.
          await pg.execProtocolStream(serialize.sync(), { syncToFs: false }).catch(() => undefined);
          throw error;
        }
        // PGlite leaves this call's data callback installed afterwards; its own query, exec and
        // transaction install theirs on every call (execProtocolStream), so they are not affected.
        const reply = new ReplyBuffer();
        await pg.execProtocolRawStream(
          concat(serialize.bind({ statement: name, values }), serialize.describe({ type: "P" }), serialize.execute({}), serialize.sync()),
          { syncToFs: !inTransaction, onRawData: (bytes) => reply.append(bytes) },
        );
        const { result, error, notifications } = readResults(reply.bytes(), parsers, options);
        if (notifications.length > 0) delivered.push(...notifications);
        if (error) throw error;
        return result as Results<T>;
      } catch (error) {
        // As PGlite's query reports a database error: the statement and its parameters attached.
        if (error instanceof Error && "severity" in error) Object.assign(error, { query: sql, params, queryOptions: options });
        throw error;
      }
    };
    const exclusive = pg as unknown as { _runExclusiveQuery<R>(fn: () => Promise<R>): Promise<R>; _runExclusiveTransaction<R>(fn: () => Promise<R>): Promise<R> };
    const delivered: DeliveredNotification[] = [];
    try {
      return await (inTransaction ? exclusive._runExclusiveQuery(run) : exclusive._runExclusiveTransaction(() => exclusive._runExclusiveQuery(run)));
    } finally {
      if (delivered.length > 0) redeliver(pg, delivered);
    }
  };
}

/** Whether `pipelinedStatement` can run a statement with these options (else PGlite's own query does). */
export function pipelinable(options: QueryOptions | undefined): boolean {
  return !options?.blob && !options?.paramTypes;
}

const serialize = protocol.serialize;
/** Per PGlite instance: its prepared texts in least-recently-used order, and the names handed out. */
interface PreparedStatements {
  texts: Map<string, { name: string; types: number[] }>;
  count: number;
}
const preparedByInstance = new WeakMap<PGlite, PreparedStatements>();

function preparedStatementsOf(pg: PGlite): PreparedStatements {
  let prepared = preparedByInstance.get(pg);
  if (!prepared) preparedByInstance.set(pg, (prepared = { texts: new Map(), count: 0 }));
  return prepared;
}

type ParameterValue = string | ArrayBufferView | null;

/**
 * A parameter as PGlite's query writes it: its type's serializer, else its own text. One addition:
 * bytes for a type PGlite has no serializer for (pgvector's `vector`) go in the binary format, read
 * by the type's receive function (PGlite's query would have sent their `toString()`, never
 * meaningful). A query vector in binary skips the database's parsing of 384 decimal numbers:
 * ~1.2 ms in WASM, whose float parsing is slow.
 */
function parameterValue(pg: PGlite, param: unknown, type: number, options: QueryOptions | undefined): ParameterValue {
  if (param === null || param === undefined) return null;
  const serializer = options?.serializers?.[type] ?? pg.serializers[type];
  if (serializer) return serializer(param);
  return ArrayBuffer.isView(param) ? param : (param as { toString(): string }).toString();
}

/**
 * A NOTIFY committed by a statement run here reached this process in its raw reply, which PGlite's
 * listeners never read: it is sent again through PGlite's own query, whose reply they do read. (A
 * NOTIFY inside a transaction arrives with PGlite's own COMMIT and never comes here.)
 */
function redeliver(pg: PGlite, notifications: DeliveredNotification[]): void {
  pg.query(`SELECT pg_notify(n.channel, n.payload) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS n(channel, payload, i) ORDER BY n.i`, [
    notifications.map((n) => n.channel),
    notifications.map((n) => n.payload),
  ]).catch((error: unknown) => console.error("[engram] database: a notification could not be delivered", error));
}

/** The backend's reply to one call, copied out of WASM memory as it is written. */
class ReplyBuffer {
  #buffer = Buffer.allocUnsafe(16384);
  #length = 0;

  append(bytes: Uint8Array): void {
    if (this.#length + bytes.length > this.#buffer.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.#buffer.length * 2, this.#length + bytes.length));
      this.#buffer.copy(grown, 0, 0, this.#length);
      this.#buffer = grown;
    }
    this.#buffer.set(bytes, this.#length);
    this.#length += bytes.length;
  }

  bytes(): Buffer {
    return this.#buffer.subarray(0, this.#length);
  }
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
