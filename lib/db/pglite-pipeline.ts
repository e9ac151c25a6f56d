import { parse, protocol, type PGlite, type QueryOptions, type Results } from "@electric-sql/pglite";

type BackendMessage = Awaited<ReturnType<PGlite["execProtocolStream"]>>[number];
type ParserTable = PGlite["parsers"];

/** Statement texts whose parameter types one PGlite instance remembers (the least recently used go first). */
const REMEMBERED_STATEMENTS = 2000;

/**
 * One statement with parameters in one call into the WASM backend, where PGlite's own `query` makes
 * six (Parse, Describe statement, Bind, Describe portal, Execute, Sync), each a separate trip through
 * its message loop: ~0.1 ms a statement on this machine, 1–2 ms of a 5 KB create's ~20 (~10 statements).
 *
 * PGlite describes every statement first only to learn its parameters' types, which choose how each
 * JavaScript value is written as text (a Date, an array, JSON, bytes). Those types depend on the
 * statement's text and the schema alone, so they are remembered per text: the first time a text runs,
 * PGlite's own sequence goes in two calls (Parse and Describe, then the rest); after that Parse, Bind,
 * Describe portal, Execute and Sync go as one batch. The values are written by PGlite's own
 * serializers exactly as its `query` writes them, and the result is parsed by its own `parseResults`.
 * (A schema change at run time that changed a remembered text's parameter types would not be seen;
 * migrations run before the first statement.)
 *
 * `inTransaction`: the statement belongs to a transaction PGlite's `transaction()` opened (its
 * mutex is held), so only the query mutex is taken and the files are not synced after it, as PGlite
 * does for its own transaction statements.
 */
export function pipelinedStatement(pg: PGlite, inTransaction: boolean) {
  const remembered = parameterTypesOf(pg);
  return async <T>(sql: string, params: unknown[] = [], options: QueryOptions | undefined, parsers: ParserTable): Promise<Results<T>> => {
    const run = async () => {
      try {
        let types = remembered.get(sql);
        let messages: BackendMessage[];
        const execution = (values: ParameterValue[]) => [serialize.bind({ values }), serialize.describe({ type: "P" }), serialize.execute({}), serialize.sync()];
        const final = { syncToFs: !inTransaction, ...(options?.onNotice && { onNotice: options.onNotice }) };
        if (types) {
          // Refreshed as the most recently used.
          remembered.delete(sql);
          remembered.set(sql, types);
          messages = await pg.execProtocolStream(concat(serialize.parse({ text: sql }), ...execution(params.map((param, i) => parameterValue(pg, param, types![i]!, options)))), final);
        } else {
          // First sight of this text: PGlite's own sequence in two calls, Parse and Describe, then the rest.
          let values: ParameterValue[];
          try {
            types = parse.parseDescribeStatementResults(await pg.execProtocolStream(concat(serialize.parse({ text: sql }), serialize.describe({ type: "S" })), { syncToFs: false }));
            values = params.map((param, i) => parameterValue(pg, param, types![i]!, options));
          } catch (error) {
            // A failed Parse (or a value no serializer accepts) must not leave the backend waiting for Sync.
            await pg.execProtocolStream(serialize.sync(), { syncToFs: false }).catch(() => undefined);
            throw error;
          }
          remembered.set(sql, types);
          if (remembered.size > REMEMBERED_STATEMENTS) remembered.delete(remembered.keys().next().value!);
          messages = await pg.execProtocolStream(concat(...execution(values)), final);
        }
        return parse.parseResults(messages, parsers, { ...options, parsers: undefined })[0] as Results<T>;
      } catch (error) {
        // As PGlite's query reports a database error: the statement and its parameters attached.
        if (error instanceof Error && "severity" in error) Object.assign(error, { query: sql, params, queryOptions: options });
        throw error;
      }
    };
    const exclusive = pg as unknown as { _runExclusiveQuery<R>(fn: () => Promise<R>): Promise<R>; _runExclusiveTransaction<R>(fn: () => Promise<R>): Promise<R> };
    return inTransaction ? exclusive._runExclusiveQuery(run) : exclusive._runExclusiveTransaction(() => exclusive._runExclusiveQuery(run));
  };
}

/** Whether `pipelinedStatement` can run a statement with these options (else PGlite's own query does). */
export function pipelinable(options: QueryOptions | undefined): boolean {
  return !options?.blob && !options?.paramTypes;
}

const serialize = protocol.serialize;
const rememberedByInstance = new WeakMap<PGlite, Map<string, number[]>>();

function parameterTypesOf(pg: PGlite): Map<string, number[]> {
  let remembered = rememberedByInstance.get(pg);
  if (!remembered) rememberedByInstance.set(pg, (remembered = new Map()));
  return remembered;
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

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
