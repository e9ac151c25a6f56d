import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { PostgresRateLimiter } from "@/lib/api/postgres-rate-limit.ts";
import { setRateLimiter } from "@/lib/api/rate-limit.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { flushUsage } from "@/lib/usage/count-usage.ts";
import { createHarness, HARNESS_LIMITS, type Client, type Harness } from "./support/harness.ts";

// Issue 16: the API's hot path is bound by the server's work per statement (the pg driver's
// writes, Prisma's engine, the garbage of both). This counts the statements each operation of
// bench:load's mix sends to the database, as the driver sends them (observed, nothing replaced):
// on PGlite every Execute or simple Query reaching the backend, on PostgreSQL every
// client.query of node-postgres (BEGIN and COMMIT included). The budgets fail the test when a
// removed round trip comes back. The batched writes (access counts, usage counters) are flushed
// before each request and not counted: they are a share of one statement per batch, not per request.

const sent: string[] = [];
let counting = false;
const record = (text: string) => {
  if (counting) sent.push(text.replace(/\s+/g, " ").trim().slice(0, 140));
};

// PGlite: every call into the backend passes execProtocolRawSync with the frontend messages.
// Named statements are parsed once per text and run later by name, so the names are tracked always.
const preparedTexts = new Map<string, string>();
let unnamedText = "";
let boundText = "";
const rawSync = PGlite.prototype.execProtocolRawSync;
PGlite.prototype.execProtocolRawSync = function (this: PGlite, message: Uint8Array) {
  const bytes = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  for (let at = 0; at + 5 <= bytes.length; ) {
    const type = String.fromCharCode(bytes[at]!);
    const end = at + 1 + bytes.readInt32BE(at + 1);
    const strings = bytes.subarray(at + 5, end).toString("utf8").split("\0");
    if (type === "Q") record(strings[0]!);
    else if (type === "P") {
      if (strings[0]) preparedTexts.set(strings[0], strings[1]!);
      else unnamedText = strings[1]!;
    } else if (type === "B") boundText = strings[1] ? (preparedTexts.get(strings[1]) ?? "?") : unnamedText;
    else if (type === "E") record(boundText);
    at = end;
  }
  return rawSync.call(this, message);
};

// PostgreSQL: node-postgres sends every statement (Prisma's, the plain ones, BEGIN/COMMIT) through Client#query.
const clientQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const q = args[0] as string | { text?: string };
  record(typeof q === "string" ? q : (q?.text ?? "?"));
  return clientQuery.apply(this, args);
} as typeof pg.Client.prototype.query;

let h: Harness;
let ann: Client;
const ids: string[] = [];
const filed: string[] = [];
let topicId: string;

beforeAll(async () => {
  h = await createHarness();
  // The limiter the server runs on PostgreSQL (shared by its processes), on either database: its statements count.
  setRateLimiter(new PostgresRateLimiter({ ...HARNESS_LIMITS }, async () => h.database.sql));
  ann = await h.user("Ann");
  for (let i = 0; i < 5; i++) {
    const res = await ann.post("/v1/memories", { content: `# Deploy ${i}\n\nRestart the queue worker after deploy number ${i}.`, source_path: `seed/${i}.md` });
    expect(res.status).toBe(201);
    ids.push(res.body.data.id);
  }
  // Memories filed under a topic cost no more: hiding a topic being deleted (which the memories show
  // with no topic) is done within the statements above, not by a lookup of the page's topics.
  const topic = await ann.post("/v1/topics", { name: "Deploys" });
  expect(topic.status).toBe(201);
  topicId = topic.body.data.id;
  for (let i = 0; i < 3; i++) {
    const res = await ann.post("/v1/memories", { content: `# Filed deploy ${i}\n\nRestart the queue worker after filed deploy ${i}.`, source_path: `filed/${i}.md` });
    expect(res.status).toBe(201);
    filed.push(res.body.data.id);
  }
  expect((await ann.post("/v1/memories/batch-move", { ids: filed, topic_id: topicId })).body.data.moved).toBe(3);
});
afterAll(() => h?.close());

/**
 * Statements per request, the same on both databases: the key with its user and the rate limit's
 * charge (one statement), then
 * recall: the lexical leg (the caller's hubs included), the candidates, the recalled rows;
 * push: the target hub, then BEGIN, the locks, one read (the membership re-check, the source_path
 * row lock and the duplicate check), the insert, the quota read with the event, COMMIT;
 * list: the hub scope with the hubs' memory counters, the page;
 * get: the access-counting read, its attachments.
 */
const BUDGET = { recall: 4, push: 8, list: 3, get: 3 };

/** The statements one request sends, after a warm-up of the same request (a key's first use writes last_used_at). */
async function statementsOf(name: string, request: (n: number) => Promise<{ status: number }>, expected: number): Promise<string[]> {
  await request(0);
  await flushAccess();
  await flushUsage();
  sent.length = 0;
  counting = true;
  let status: number;
  try {
    status = (await request(1)).status;
  } finally {
    counting = false;
  }
  expect(status).toBe(expected);
  const statements = [...sent];
  console.log(`${name} (${h.database.kind}): ${statements.length} statements\n${statements.map((s) => `    ${s}`).join("\n")}`);
  return statements;
}

describe("statements per request of bench:load's mix", () => {
  test("POST /v1/recall", async () => {
    const statements = await statementsOf("recall", () => ann.post("/v1/recall", { query: "how do I restart the queue worker", limit: 10 }), 200);
    expect(statements.length).toBeLessThanOrEqual(BUDGET.recall);
  });

  test("POST /v1/memories (a new memory at a new source_path)", async () => {
    const statements = await statementsOf(
      "push",
      (n) => ann.post("/v1/memories", { content: `# Note ${n} ${Math.random()}\n\nThe billing job runs hourly.`, source_path: `notes/${n}-${Math.random()}.md` }),
      201,
    );
    expect(statements.length).toBeLessThanOrEqual(BUDGET.push);
  });

  test("GET /v1/memories?limit=20", async () => {
    const statements = await statementsOf("list", () => ann.get("/v1/memories?limit=20"), 200);
    expect(statements.length).toBeLessThanOrEqual(BUDGET.list);
  });

  test("GET /v1/memories/{id}", async () => {
    const statements = await statementsOf("get", (n) => ann.get(`/v1/memories/${ids[n]}`), 200);
    expect(statements.length).toBeLessThanOrEqual(BUDGET.get);
  });

  test("GET /v1/memories/{id} of a memory filed under a topic", async () => {
    const statements = await statementsOf("get (filed)", (n) => ann.get(`/v1/memories/${filed[n]}`), 200);
    expect(statements.length).toBeLessThanOrEqual(BUDGET.get);
  });

  test("GET /v1/memories?limit=20 with memories filed under a topic, and ?topic_id=", async () => {
    const statements = await statementsOf("list (filed)", () => ann.get("/v1/memories?limit=20"), 200);
    expect(statements.length).toBeLessThanOrEqual(BUDGET.list);
    // Its first page counts the matching rows: one more than the hub's counters, no lookup of the topic.
    const filtered = await statementsOf("list (topic_id)", () => ann.get(`/v1/memories?limit=20&topic_id=${topicId}`), 200);
    expect(filtered.length).toBeLessThanOrEqual(BUDGET.list + 1);
  });

  test("POST /v1/recall finding memories filed under a topic", async () => {
    let found: { topic_id?: string }[] = [];
    const statements = await statementsOf(
      "recall (filed)",
      async () => {
        const res = await ann.post("/v1/recall", { query: "restart the queue worker after filed deploy", limit: 10 });
        found = res.body.data.memories;
        return res;
      },
      200,
    );
    expect(found.some((memory) => memory.topic_id === topicId)).toBe(true);
    expect(statements.length).toBeLessThanOrEqual(BUDGET.recall);
  });
});
