import { PGlite, type QueryOptions } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { afterAll, beforeAll, expect, test } from "vitest";
import { pipelinedStatement } from "@/lib/db/pglite-pipeline.ts";
import { vectorParameter } from "@/lib/recall/vector-parameter.ts";

// The embedded database runs statements as one batch of protocol messages (lib/db/pglite-pipeline.ts)
// instead of PGlite's six calls. Whatever the values, the answer must be the one PGlite's own query
// gives: the same parameters written the same way, the same rows, the same errors.

let pg: PGlite;
let calls = 0;

beforeAll(async () => {
  pg = await PGlite.create("memory://", { extensions: { vector } });
  await pg.exec(`
    CREATE EXTENSION vector;
    CREATE TABLE things (
      id int PRIMARY KEY, name text, big bigint, flag boolean, ratio float8, amount numeric,
      at timestamptz, day date, doc jsonb, tags text[], ids uuid[], bytes bytea, embedding vector(3)
    );`);
  // Calls into the backend: the pipeline's own (raw replies) and PGlite's parsed ones.
  const stream = pg.execProtocolStream.bind(pg);
  pg.execProtocolStream = (async (...args: Parameters<PGlite["execProtocolStream"]>) => {
    calls++;
    return stream(...args);
  }) as PGlite["execProtocolStream"];
  const raw = pg.execProtocolRawStream.bind(pg);
  pg.execProtocolRawStream = (async (...args: Parameters<PGlite["execProtocolRawStream"]>) => {
    calls++;
    return raw(...args);
  }) as PGlite["execProtocolRawStream"];
});

afterAll(async () => {
  await pg?.close();
});

const pipelined = (sql: string, params: unknown[], options?: QueryOptions) => pipelinedStatement(pg, false)(sql, params, options, pg.parsers);

const INSERT = `INSERT INTO things (id, name, big, flag, ratio, amount, at, day, doc, tags, ids, bytes, embedding)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING *`;

const rows: unknown[][] = [
  [1, "plain", 9007199254740993n, true, 0.25, "12.50", new Date("2026-01-02T03:04:05.678Z"), "2026-02-03", { a: [1, "x"], b: null }, ["a", "b"], ["01a2143c-89f0-71a6-85c8-58136ed7cab4"], new Uint8Array([0, 1, 254, 255]), "[1,2,3]"],
  // Quotes, backslashes, commas, braces, NULL and empty elements; an empty JSON array (not an object).
  [2, `it's "quoted" \\ back`, -1n, false, -1e-9, "0", "2026-05-06 07:08:09+02", new Date("2026-07-08T00:00:00Z"), [], [`a"b`, "c\\d", "e,f", "{g}", "", null], [], new Uint8Array([]), "[0.5,-0.5,0]"],
  // Values PGlite writes with their type's serializer: booleans as strings, dates as milliseconds, JSON given as text.
  [3, "中文 ✓", 0, "yes", 3, 7, Date.UTC(2026, 0, 1), "2026-01-01", '{"already":"text"}', null, null, null, null],
];

test("rows written through the pipeline read back as PGlite's own query writes and reads them", async () => {
  const own = await PGlite.create("memory://", { extensions: { vector } });
  await own.exec(`CREATE EXTENSION vector; CREATE TABLE things (id int PRIMARY KEY, name text, big bigint, flag boolean, ratio float8, amount numeric,
    at timestamptz, day date, doc jsonb, tags text[], ids uuid[], bytes bytea, embedding vector(3));`);
  try {
    for (const row of rows) {
      const mine = await pipelined(INSERT, row);
      const theirs = await own.query(INSERT, row);
      expect(mine.rows).toEqual(theirs.rows);
      expect(mine.fields).toEqual(theirs.fields);
      expect(mine.affectedRows).toBe(1);
    }
    const select = "SELECT * FROM things WHERE id = ANY($1::int[]) AND name <> $2 ORDER BY id";
    for (const options of [undefined, { rowMode: "array" as const }]) {
      const mine = await pipelined(select, [[1, 2, 3], "nothing"], options);
      expect(mine.rows).toHaveLength(3);
      expect(mine.rows).toEqual((await own.query(select, [[1, 2, 3], "nothing"], options)).rows);
    }
    const [second] = (await pipelined("SELECT doc, tags FROM things WHERE id = $1", [2])).rows as { doc: unknown; tags: unknown }[];
    expect(second).toEqual({ doc: [], tags: [`a"b`, "c\\d", "e,f", "{g}", "", null] });
  } finally {
    await own.close();
  }
});

test("whole results (rows, fields, command, counts) are PGlite's own, in both row modes, however large", async () => {
  const own = await PGlite.create("memory://");
  await own.exec("CREATE TABLE t (id int PRIMARY KEY, body text)");
  await pg.exec("CREATE TABLE t (id int PRIMARY KEY, body text)");
  try {
    const statements: [string, unknown[]][] = [
      ["INSERT INTO t SELECT g, repeat(chr(64 + g % 26), g) FROM generate_series(1, $1::int) AS g", [400]],
      ["SELECT id, body, length(body) AS n, NULL::text AS nothing, $1::text AS \"__proto__\", 'é中✓' AS wide FROM t WHERE id <= $2 ORDER BY id", ["own", 400]],
      ["SELECT repeat('x', $1::int) AS big", [300_000]],
      ["SELECT id FROM t WHERE id < $1", [0]],
      ["UPDATE t SET body = $1 WHERE id % 7 = 0", ["seven"]],
      ["DELETE FROM t WHERE id > $1 RETURNING id", [390]],
      ["SELECT $1::int AS a, $1::int AS a", [5]],
      ["COPY (SELECT id FROM t WHERE id < 3) TO STDOUT", []],
    ];
    for (const options of [undefined, { rowMode: "array" as const }]) {
      for (const [sql, params] of statements) {
        if (options && sql.startsWith("INSERT")) continue;
        const mine = await pipelined(sql, params, options);
        const theirs = await own.query(sql, params, options);
        expect(mine).toEqual(theirs);
      }
    }
    const [row] = (await pipelined("SELECT $1::text AS \"__proto__\"", ["own"])).rows as Record<string, unknown>[];
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.keys(row!)).toEqual(["__proto__"]);
  } finally {
    await own.close();
  }
});

test("notices reach onNotice; a NOTIFY committed by a statement reaches PGlite's listeners once", async () => {
  await pg.exec(`CREATE FUNCTION noisy(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RAISE NOTICE 'noisy %', x; RETURN x; END $$`);
  const notices: string[] = [];
  expect((await pipelined("SELECT noisy($1) AS x", [3], { onNotice: (notice) => notices.push(String(notice.message)) })).rows).toEqual([{ x: 3 }]);
  expect(notices).toEqual(["noisy 3"]);
  const heard: string[] = [];
  const unlisten = await pg.listen("pipeline_test", (payload) => heard.push(payload));
  try {
    await pipelined("SELECT pg_notify($1, $2), pg_notify($1, $3)", ["pipeline_test", "first", "second"]);
    await expect.poll(() => heard).toEqual(["first", "second"]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(heard).toEqual(["first", "second"]);
  } finally {
    await unlisten();
  }
});

test("a statement's parameter types are asked once; later runs are one call into the database", async () => {
  const sql = "SELECT $1::int + $2::int AS sum";
  calls = 0;
  expect((await pipelined(sql, [1, 2])).rows).toEqual([{ sum: 3 }]);
  expect(calls).toBe(2); // Parse + Describe, then Bind … Sync
  calls = 0;
  expect((await pipelined(sql, [40, 2])).rows).toEqual([{ sum: 42 }]);
  expect(calls).toBe(1);
});

test("database errors carry the statement and leave the connection usable; updates count their rows", async () => {
  const duplicate = pipelined(INSERT, rows[0]!);
  await expect(duplicate).rejects.toMatchObject({ code: "23505", query: INSERT, params: rows[0] });
  await expect(pipelined("SELEC nonsense $1", [1])).rejects.toMatchObject({ code: "42601" });
  await expect(pipelined("SELECT $1::int", ["not a number"])).rejects.toMatchObject({ code: "22P02" });
  // A value PGlite's serializer refuses, before anything ran: first sight of the text, then remembered.
  for (let i = 0; i < 2; i++) await expect(pipelined("SELECT $1::boolean AS b", ["maybe"])).rejects.toThrow(/boolean/);
  expect((await pipelined("SELECT $1::boolean AS b", ["yes"])).rows).toEqual([{ b: true }]);
  expect((await pipelined("UPDATE things SET name = $1 WHERE id > $2", ["renamed", 1])).affectedRows).toBe(2);
  expect((await pipelined("SELECT count(*)::int AS n FROM things WHERE name = $1", ["renamed"])).rows).toEqual([{ n: 2 }]);
});

test("inside a transaction: its statements see each other, an error aborts it, a rollback undoes it", async () => {
  const inside = pipelinedStatement(pg, true);
  await pg.transaction(async () => {
    await inside("INSERT INTO things (id, name) VALUES ($1, $2)", [10, "in tx"], undefined, pg.parsers);
    expect((await inside("SELECT name FROM things WHERE id = $1", [10], undefined, pg.parsers)).rows).toEqual([{ name: "in tx" }]);
  });
  expect((await pipelined("SELECT name FROM things WHERE id = $1", [10])).rows).toEqual([{ name: "in tx" }]);

  await expect(
    pg.transaction(async () => {
      await inside("INSERT INTO things (id, name) VALUES ($1, $2)", [11, "lost"], undefined, pg.parsers);
      await expect(inside("INSERT INTO things (id) VALUES ($1)", [10], undefined, pg.parsers)).rejects.toMatchObject({ code: "23505" });
      // The transaction is aborted: PostgreSQL refuses everything until the rollback.
      await inside("SELECT 1 WHERE $1::int = 1", [1], undefined, pg.parsers);
    }),
  ).rejects.toMatchObject({ code: "25P02" });
  expect((await pipelined("SELECT count(*)::int AS n FROM things WHERE id = $1", [11])).rows).toEqual([{ n: 0 }]);
  // PGlite's own statements still work after all of this.
  expect((await pg.query("SELECT count(*)::int AS n FROM things")).rows).toEqual([{ n: 4 }]);
});

test("a vector given as bytes goes in pgvector's binary format and reads as its text form; bytea stays bytea", async () => {
  const values = [0.1, -2.5, 1 / 3];
  const sql = "SELECT $1::vector AS v, $1::vector = $2::vector AS same, $3::bytea AS b";
  for (let i = 0; i < 2; i++) {
    // First sight of the text (Parse + Describe), then the remembered one-call path.
    const [row] = (await pipelined(sql, [vectorParameter(values), `[${values.join(",")}]`, new Uint8Array([7, 8])])).rows as { v: string; same: boolean; b: Uint8Array }[];
    expect(row!.same).toBe(true);
    expect(row!.v).toBe("[0.1,-2.5,0.33333334]"); // float4, as pgvector prints it
    expect([...row!.b]).toEqual([7, 8]);
  }
  // Bytes that are not a vector are the receive function's error, and the connection stays usable.
  await expect(pipelined("SELECT $1::vector AS v", [new Uint8Array([0, 3, 0, 0])])).rejects.toThrow();
  expect((await pipelined("SELECT vector_dims($1::vector) AS n", [vectorParameter([1, 2])])).rows).toEqual([{ n: 2 }]);
});

test("texts stay prepared across transactions, rolled back or not, and at most 500 are kept", async () => {
  const inside = pipelinedStatement(pg, true);
  const text = "SELECT $1::int * 2 AS twice";
  await expect(
    pg.transaction(async () => {
      expect((await inside(text, [4], undefined, pg.parsers)).rows).toEqual([{ twice: 8 }]);
      throw new Error("roll back");
    }),
  ).rejects.toThrow("roll back");
  calls = 0;
  expect((await pipelined(text, [5])).rows).toEqual([{ twice: 10 }]);
  expect(calls).toBe(1); // still prepared: no second Parse
  const preparedCount = async () => ((await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_prepared_statements")).rows[0]!.n);
  for (let i = 0; i < 520; i++) expect((await pipelined(`SELECT $1::int + ${i} AS n`, [1])).rows).toEqual([{ n: 1 + i }]);
  expect(await preparedCount()).toBe(500);
  // The oldest were closed; they prepare again when they come back.
  calls = 0;
  expect((await pipelined(text, [6])).rows).toEqual([{ twice: 12 }]);
  expect(calls).toBe(2);
  expect(await preparedCount()).toBe(500);
});
