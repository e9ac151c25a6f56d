// npm run bench:ask-events — issue 14's targets on a fresh on-disk embedded database (PGlite + pgvector)
// with 10k memories and real local MiniLM embeddings. Never part of npm test.
//
//   1. extractive POST /v1/ask (JSON, no chat model): wall time p50/p95 — target p95 ≤ 150 ms
//   2. POST /v1/ask with Accept: text/event-stream: time to the first byte of the body — target ≤ 50 ms
//   3. an event reaching a connected /v1/events/stream client after the write — target p95 ≤ 100 ms
//
// Corpus as in bench/recall.ts: BENCH_DISTINCT passages embedded for real, every memory one chunk
// whose vector is a small perturbation of one of them (re-normalised) and whose text adds sampled words.
//
//   BENCH_MEMORIES   (default 10000)   BENCH_QUERIES (default 150)   BENCH_DISTINCT (default 400)
//   BENCH_EVENTS     events measured (default 200)   BENCH_SUBSCRIBERS  open streams (default 10)
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { POST as askRoute } from "@/app/v1/ask/route.ts";
import { GET as streamRoute } from "@/app/v1/events/stream/route.ts";
import { POST as pushRoute } from "@/app/v1/memories/route.ts";
import { POST as recallRoute } from "@/app/v1/recall/route.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { getEmbedder } from "@/lib/ai/embedder.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { openDatabase, setDatabase } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";
import { clearQueryVectorCache } from "@/lib/recall/embed-query.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { MEMORIES, QUERIES } from "../eval/corpus.ts";

const MEMORY_COUNT = Number(process.env.BENCH_MEMORIES ?? 10_000);
const QUERY_COUNT = Number(process.env.BENCH_QUERIES ?? 150);
const DISTINCT = Number(process.env.BENCH_DISTINCT ?? 400);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 200);
const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 10);

let seed = 7;
const random = () => {
  seed = (seed * 1664525 + 1013904223) % 4294967296;
  return seed / 4294967296;
};
const gaussian = () => Math.sqrt(-2 * Math.log(random() || 1e-12)) * Math.cos(2 * Math.PI * random());
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
const round = (n: number) => Math.round(n * 10) / 10;
const summary = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { n: values.length, p50: round(percentile(sorted, 50)), p95: round(percentile(sorted, 95)), max: round(sorted.at(-1) ?? NaN) };
};

const sentences = MEMORIES.flatMap((m) => m.content.split(/(?<=[.!?])\s+|\n+/).filter((s) => s.trim().length > 20));
const words = [...new Set(MEMORIES.flatMap((m) => m.content.toLowerCase().match(/[a-z][a-z0-9_]{2,}/g) ?? []))];
const passage = () => Array.from({ length: 3 + Math.floor(random() * 4) }, () => sentences[Math.floor(random() * sentences.length)]).join(" ");
const perturb = (v: number[]) => {
  const out = v.map((x) => x + gaussian() * 0.015);
  const norm = Math.hypot(...out);
  return out.map((x) => x / norm);
};

const embedder = await getEmbedder();
if (!embedder) throw new Error("No embedding model: run `npm run models` first");
setRateLimiter(new MemoryRateLimiter({ regular: 1e9, heavy: 1e9, light: 1e9 }));
const dataDir = mkdtempSync(path.join(tmpdir(), "engram-bench-ask-"));
const database = await openDatabase({ dataDir: path.join(dataDir, "pglite") });
setDatabase(database);
const now = new Date();
const { user, hub, extra } = await createUser(database.prisma, { email: "bench-ask@example.test", name: "Bench" }, now, (tx, created) =>
  insertApiKey(tx, created.user.id, "bench", now),
);
const key = extra.key;

console.log(`embedding ${DISTINCT} distinct passages…`);
const texts = Array.from({ length: DISTINCT }, passage);
const vectors = await embedder.embed(texts, "document");
const distinct = texts.map((text, i) => ({ text, vector: vectors[i]! }));
console.log(`loading ${MEMORY_COUNT} memories…`);
await database.sql.exec(`DROP INDEX IF EXISTS chunks_embedding_hnsw_idx`);
for (let start = 0; start < MEMORY_COUNT; start += 500) {
  const count = Math.min(500, MEMORY_COUNT - start);
  const ids = Array.from({ length: count }, () => newId(Date.now() - Math.floor(random() * 400) * 86_400_000));
  const bases = ids.map(() => distinct[Math.floor(random() * distinct.length)]!);
  const contents = bases.map((b) => `${b.text} ${Array.from({ length: 8 }, () => words[Math.floor(random() * words.length)]).join(" ")}.`);
  await database.sql.query(
    `INSERT INTO memories (id, hub_id, owner_id, title, content, content_type, content_hash, kind, stability, state, source, processing_status, created_at, updated_at)
     SELECT u.id, $2::uuid, $3::uuid, u.title, u.content, 'markdown', md5(u.content), 'semantic', 'stable', 'active', 'api', 'done', now(), now()
     FROM unnest($1::uuid[], $4::text[], $5::text[]) AS u(id, title, content)`,
    [ids, hub.id, user.id, bases.map((b) => b.text.slice(0, 60)), contents],
  );
  await database.sql.query(
    `INSERT INTO chunks (id, memory_id, hub_id, position, content, heading_chain, token_count, search_vector, search_length, embedding)
     SELECT c.id, c.memory_id, $3::uuid, 0, c.content, '', 0, c.vec, engram_tsvector_length(c.vec), c.embedding::vector
     FROM (SELECT u.*, engram_document_tsvector(u.content) AS vec FROM unnest($1::uuid[], $2::uuid[], $4::text[], $5::text[]) AS u(id, memory_id, content, embedding)) AS c`,
    [ids.map(() => newId()), ids, hub.id, contents, bases.map((b) => `[${perturb(b.vector).join(",")}]`)],
  );
}
await database.sql.exec(`CREATE INDEX chunks_embedding_hnsw_idx ON chunks USING hnsw (embedding vector_cosine_ops)`);
await database.sql.exec(`VACUUM ANALYZE`);

const base = QUERIES.map((q) => (typeof q.query === "function" ? q.query(new Date()) : q.query));
const queries = Array.from({ length: QUERY_COUNT }, (_, i) => (i < base.length ? base[i]! : `${base[i % base.length]} ${words[Math.floor(random() * words.length)]}`));
const ask = (query: string, accept = "application/json") =>
  askRoute(
    new Request("http://bench.test/v1/ask", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept },
      body: JSON.stringify({ query }),
    }),
    { params: Promise.resolve({}) },
  );

// 0. Recall alone on the same queries: ask's own cost is the difference.
for (const q of queries.slice(0, 30)) await (await ask(q)).json();
clearQueryVectorCache();
const recallWall: number[] = [];
for (const q of queries) {
  const started = performance.now();
  const res = await recallRoute(
    new Request("http://bench.test/v1/recall", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ query: q, limit: 10 }),
    }),
    { params: Promise.resolve({}) },
  );
  await res.json();
  recallWall.push(performance.now() - started);
  await flushAccess();
}

// 1. Extractive ask, JSON, with query vectors recomputed.
let answered = 0;
clearQueryVectorCache();
const askWall: number[] = [];
const askServer: number[] = [];
const askRetrieval: number[] = [];
const askSynthesis: number[] = [];
for (const q of queries) {
  const started = performance.now();
  const res = await ask(q);
  const json = (await res.json()) as {
    data: { citations: unknown[]; metadata: { total_latency_ms: number; retrieval_latency_ms: number; synthesis_latency_ms: number } };
  };
  askWall.push(performance.now() - started);
  if (res.status !== 200) throw new Error(JSON.stringify(json));
  askServer.push(json.data.metadata.total_latency_ms);
  askRetrieval.push(json.data.metadata.retrieval_latency_ms);
  askSynthesis.push(json.data.metadata.synthesis_latency_ms);
  if (json.data.citations.length) answered++;
  await flushAccess();
}

// 2. First byte of the SSE body, and the whole streamed answer.
clearQueryVectorCache();
const firstByte: number[] = [];
const sseTotal: number[] = [];
for (const q of queries.slice(0, 100)) {
  const started = performance.now();
  const res = await ask(q, "text/event-stream");
  const reader = res.body!.getReader();
  await reader.read();
  firstByte.push(performance.now() - started);
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  if (!text.includes("event: done")) throw new Error(`stream ended without done: ${text.slice(-300)}`);
  sseTotal.push(performance.now() - started);
  await flushAccess();
}

// 3. Event latency: SUBSCRIBERS open streams (the bench user), pushes through the API one at a time.
const received = new Map<string, number[]>();
const streams = await Promise.all(
  Array.from({ length: SUBSCRIBERS }, async () => {
    const res = await streamRoute(new Request("http://bench.test/v1/events/stream?types=memory.created", { headers: { authorization: `Bearer ${key}` } }), {
      params: Promise.resolve({}),
    });
    const reader = res.body!.getReader();
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        for (const match of buffer.matchAll(/"entity_id":"([0-9a-f-]{36})"/g)) {
          const list = received.get(match[1]!) ?? [];
          list.push(performance.now());
          received.set(match[1]!, list);
        }
        buffer = buffer.slice(buffer.lastIndexOf("\n\n") + 2);
      }
    })();
    return reader;
  }),
);
await new Promise((r) => setTimeout(r, 200));
const afterStart: number[] = [];
const afterResponse: number[] = [];
for (let i = 0; i < EVENTS; i++) {
  const started = performance.now();
  const res = await pushRoute(
    new Request("http://bench.test/v1/memories", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ content: `event bench ${i} ${random()}` }),
    }),
    { params: Promise.resolve({}) },
  );
  const responded = performance.now();
  const id = ((await res.json()) as { data: { id: string } }).data.id;
  const deadline = performance.now() + 2000;
  while ((received.get(id)?.length ?? 0) < SUBSCRIBERS && performance.now() < deadline) await new Promise((r) => setImmediate(r));
  const times = received.get(id) ?? [];
  if (times.length < SUBSCRIBERS) throw new Error(`event ${id} reached ${times.length}/${SUBSCRIBERS} subscribers`);
  for (const t of times) {
    afterStart.push(t - started);
    afterResponse.push(t - responded);
  }
}
// The same, timed from the moment the writing transaction is about to commit (its last statement done).
const afterCommit: number[] = [];
for (let i = 0; i < EVENTS; i++) {
  const entityId = newId();
  let committing = 0;
  await database.prisma.$transaction(async (tx) => {
    await emitEvent(tx, { type: "memory.created", hubId: hub.id, actorId: user.id, entityId });
    committing = performance.now();
  });
  const deadline = performance.now() + 2000;
  while ((received.get(entityId)?.length ?? 0) < SUBSCRIBERS && performance.now() < deadline) await new Promise((r) => setImmediate(r));
  const times = received.get(entityId) ?? [];
  if (times.length < SUBSCRIBERS) throw new Error(`event ${entityId} reached ${times.length}/${SUBSCRIBERS} subscribers`);
  for (const t of times) afterCommit.push(t - committing);
}
for (const reader of streams) await reader.cancel();

const results = {
  memories: MEMORY_COUNT,
  load_average_1m: (await import("node:os")).loadavg()[0],
  recall_json_wall_ms: summary(recallWall),
  ask_extractive_json: {
    wall_ms: summary(askWall),
    server_total_ms: summary(askServer),
    retrieval_ms: summary(askRetrieval),
    synthesis_ms: summary(askSynthesis),
    answered_share: round((answered / queries.length) * 100),
  },
  ask_sse: { first_byte_ms: summary(firstByte), done_ms: summary(sseTotal) },
  events: {
    subscribers: SUBSCRIBERS,
    // Transaction about to commit → event parsed by each connected client (commit, NOTIFY, membership check, SSE write).
    commit_to_client_ms: summary(afterCommit),
    // Upper bound of commit → client: measured from the start of the push request (the commit is inside it).
    push_start_to_client_ms: summary(afterStart),
    // Negative: the event reached the stream before the push's HTTP response was built.
    push_response_to_client_ms: summary(afterResponse),
  },
};
console.log(JSON.stringify(results, null, 2));
mkdirSync("bench/results", { recursive: true });
const file = path.join("bench/results", `ask-events-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
writeFileSync(file, JSON.stringify({ node: process.version, results }, null, 2));
console.log(`written ${file}`);
setDatabase(undefined);
await database.close();
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
