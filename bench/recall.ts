// npm run bench:recall — POST /v1/recall latency (server latency_ms and wall time, p50/p95), and GET /v1/memories/search and /v1/bar/search wall time, at
// 10k and 100k chunks on a fresh on-disk embedded database (PGlite + pgvector), or with
// DATABASE_URL on a fresh database of that PostgreSQL server (dropped afterwards); real local
// MiniLM query embeddings. Never part of npm test.
//
// Corpus: BENCH_DISTINCT distinct passages (built from the eval corpus's vocabulary) are embedded
// with the real model; bulk chunks reuse those vectors with small random perturbations (re-
// normalised) and vary their text with extra sampled words. Embedding 100k real chunks would take
// ~1 hour on 2 cores; this keeps the index shape (HNSW over 384-d unit vectors, realistic term
// statistics) at a fraction of the cost. Rows are bulk-inserted with SQL (the same analyser and
// statistics triggers as replaceChunks), the HNSW index is built after loading.
//
//   BENCH_SIZES      chunk counts, comma-separated (default 10000,100000)
//   BENCH_CHUNKS_PER_MEMORY  (default 2: 10k chunks = 5k memories)
//   BENCH_QUERIES    recalls measured per size (default 200, all distinct query texts)
//   BENCH_DISTINCT   distinct embedded passages (default 800)
//   BENCH_RERANK_MS  also measure with a local fake reranker answering after this many ms (default 40)
//   BENCH_WARMUP     other recalls run first (default 100): model and plans warm
//   BENCH_KEEP_DIR   embedded only: keep the loaded database in <dir>-<size> and reuse it next time
//   BENCH_PROFILE    write a CPU profile (.cpuprofile) of the steady pass only to this file
//   BENCH_BREAKDOWN=1  also print the mean time per recall of each stage of the steady pass: the query
//                    embedding and each raw SQL statement (lib/recall); the rest is Prisma and JS
//
// Each query set runs twice: "cold" is the first pass (pages may still be on disk), the reported
// figures are the second pass (the buffer cache warm, as on a running server; query embeddings are
// computed again).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Session } from "node:inspector/promises";
import path from "node:path";
import { POST as recallRoute } from "@/app/v1/recall/route.ts";
import { GET as barRoute } from "@/app/v1/bar/search/route.ts";
import { GET as searchRoute } from "@/app/v1/memories/search/route.ts";
import { getEmbedder } from "@/lib/ai/embedder.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { setDatabase, type Database } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";
import { clearQueryVectorCache } from "@/lib/recall/embed-query.ts";
import { lexicalIndexFor } from "@/lib/recall/lexical-index.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { createHttpReranker, setReranker } from "@/lib/recall/reranker.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { MEMORIES, QUERIES } from "../eval/corpus.ts";
import { freshDatabase } from "./lib/fresh-database.ts";
import { timeStages } from "./lib/time-stages.ts";

const SIZES = (process.env.BENCH_SIZES ?? "10000,100000").split(",").map(Number);
const KEEP = process.env.BENCH_KEEP_DIR;
const PER_MEMORY = Number(process.env.BENCH_CHUNKS_PER_MEMORY ?? 2);
const QUERY_COUNT = Number(process.env.BENCH_QUERIES ?? 200);
const DISTINCT = Number(process.env.BENCH_DISTINCT ?? 800);
const RERANK_MS = Number(process.env.BENCH_RERANK_MS ?? 40);
const BREAKDOWN = process.env.BENCH_BREAKDOWN === "1";
const WARMUP = Number(process.env.BENCH_WARMUP ?? 100);
const PROFILE = process.env.BENCH_PROFILE;

// Deterministic randomness so runs are comparable.
let seed = 42;
const random = () => {
  seed = (seed * 1664525 + 1013904223) % 4294967296;
  return seed / 4294967296;
};
const gaussian = () => Math.sqrt(-2 * Math.log(random() || 1e-12)) * Math.cos(2 * Math.PI * random());

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
const summary = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: round(percentile(sorted, 50)), p95: round(percentile(sorted, 95)), max: round(sorted.at(-1) ?? NaN) };
};
const round = (n: number) => Math.round(n * 10) / 10;

// Vocabulary with a Zipf-like distribution, from the eval corpus.
const words = MEMORIES.flatMap((m) => m.content.toLowerCase().match(/[a-z][a-z0-9_]{2,}/g) ?? []);
const frequency = new Map<string, number>();
for (const word of words) frequency.set(word, (frequency.get(word) ?? 0) + 1);
const vocabulary = [...frequency.keys()].sort((a, b) => frequency.get(b)! - frequency.get(a)!);
const zipfWord = () => vocabulary[Math.min(vocabulary.length - 1, Math.floor(vocabulary.length * random() ** 2.5))]!;
const sentences = MEMORIES.flatMap((m) => m.content.split(/(?<=[.!?])\s+|\n+/).filter((s) => s.trim().length > 20));
const passage = () =>
  Array.from({ length: 3 + Math.floor(random() * 4) }, () => sentences[Math.floor(random() * sentences.length)]).join(" ") +
  " " +
  Array.from({ length: 10 }, zipfWord).join(" ");

function perturb(vector: number[]): number[] {
  const out = vector.map((x) => x + gaussian() * 0.015);
  const norm = Math.hypot(...out);
  return out.map((x) => x / norm);
}

async function load(database: Database, hubIds: string[], ownerId: string, chunks: number, distinct: { text: string; vector: number[] }[]) {
  const memories = Math.ceil(chunks / PER_MEMORY);
  const batch = 500;
  const started = Date.now();
  await database.sql.exec(`DROP INDEX IF EXISTS chunks_embedding_hnsw_idx`);
  for (let start = 0; start < memories; start += batch) {
    const count = Math.min(batch, memories - start);
    const memoryIds = Array.from({ length: count }, () => newId(Date.now() - Math.floor(random() * 400) * 86_400_000));
    const memoryHubs = memoryIds.map((_, i) => hubIds[(start + i) % hubIds.length]!);
    const bases = memoryIds.map(() => distinct[Math.floor(random() * distinct.length)]!);
    await database.sql.query(
      `INSERT INTO memories (id, hub_id, owner_id, title, content, content_type, content_hash, kind, stability, state, source, processing_status, created_at, updated_at)
       SELECT u.id, u.hub_id, $3::uuid, u.title, u.content, 'markdown', md5(u.content), 'semantic', 'stable', 'active', 'api', 'done',
              now() - (random() * interval '400 days'), now()
       FROM unnest($1::uuid[], $2::uuid[], $4::text[], $5::text[]) AS u(id, hub_id, title, content)`,
      [memoryIds, memoryHubs, ownerId, bases.map((b) => b.text.slice(0, 60)), bases.map((b) => `${b.text}\n\n${passage()}`)],
    );
    const rows = memoryIds.flatMap((id, i) =>
      Array.from({ length: PER_MEMORY }, (_, position) => {
        const base = position === 0 ? bases[i]! : distinct[Math.floor(random() * distinct.length)]!;
        return { id: newId(), memoryId: id, hubId: memoryHubs[i]!, position, content: `${base.text} ${Array.from({ length: 8 }, zipfWord).join(" ")}`, vector: perturb(base.vector) };
      }),
    );
    await database.sql.query(
      `INSERT INTO chunks (id, memory_id, hub_id, position, content, heading_chain, token_count, search_vector, search_length, embedding)
       SELECT c.id, c.memory_id, c.hub_id, c.position, c.content, '', 0, c.vec, engram_tsvector_length(c.vec), c.embedding::vector
       FROM (SELECT u.*, engram_document_tsvector(u.content) AS vec
             FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::int[], $5::text[], $6::text[]) AS u(id, memory_id, hub_id, position, content, embedding)) AS c`,
      [
        rows.map((r) => r.id),
        rows.map((r) => r.memoryId),
        rows.map((r) => r.hubId),
        rows.map((r) => r.position),
        rows.map((r) => r.content),
        rows.map((r) => `[${r.vector.join(",")}]`),
      ],
    );
    process.stdout.write(`\r  loaded ${Math.min(start + count, memories)}/${memories} memories (${((Date.now() - started) / 1000).toFixed(0)} s)`);
  }
  process.stdout.write("\n");
  const indexStarted = Date.now();
  // One exec: on PostgreSQL the SET must reach the pooled connection that builds the index.
  await database.sql.exec(`SET maintenance_work_mem = '512MB'; CREATE INDEX chunks_embedding_hnsw_idx ON chunks USING hnsw (embedding vector_cosine_ops)`);
  await database.sql.exec(`VACUUM ANALYZE`);
  console.log(`  HNSW build + analyze ${((Date.now() - indexStarted) / 1000).toFixed(0)} s`);
}

/** Wraps the raw SQL runner and the embedder to time each stage; `print` restores them. */
function queryTexts(count: number): string[] {
  const base = QUERIES.map((q) => (typeof q.query === "function" ? q.query(new Date()) : q.query));
  const texts = new Set(base);
  while (texts.size < count) texts.add(`${base[Math.floor(random() * base.length)]} ${zipfWord()} ${zipfWord()}`);
  return [...texts].slice(0, count);
}

async function measure(key: string, texts: string[], body: Record<string, unknown>) {
  const wall: number[] = [];
  const server: number[] = [];
  let reranked = 0;
  let returned = 0;
  for (const query of texts) {
    const started = performance.now();
    const res = await recallRoute(
      new Request("http://bench.test/v1/recall", {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ query, ...body }),
      }),
      { params: Promise.resolve({}) },
    );
    const json = (await res.json()) as { data: { memories: unknown[]; query_metadata: { latency_ms: number; reranked: boolean } } };
    wall.push(performance.now() - started);
    if (res.status !== 200) throw new Error(`recall failed: ${JSON.stringify(json)}`);
    server.push(json.data.query_metadata.latency_ms);
    if (json.data.query_metadata.reranked) reranked += 1;
    returned += json.data.memories.length;
    await flushAccess();
  }
  return { server_latency_ms: summary(server), wall_ms: summary(wall), reranked, mean_results: round(returned / texts.length) };
}

/**
 * GET /v1/memories/search and GET /v1/bar/search (words only, no model): wall time of the route, as
 * the SDK's quick search and a search bar see it. `count` reads how many rows an answer holds.
 */
async function measureQuick(key: string, texts: string[], route: typeof searchRoute, path: string, count: (data: unknown) => number) {
  const wall: number[] = [];
  let returned = 0;
  for (const query of texts) {
    const started = performance.now();
    const res = await route(new Request(`http://bench.test${path}?${new URLSearchParams({ q: query })}`, { headers: { authorization: `Bearer ${key}` } }), {
      params: Promise.resolve({}),
    });
    const json = (await res.json()) as { data: unknown };
    wall.push(performance.now() - started);
    if (res.status !== 200) throw new Error(`${path} failed: ${JSON.stringify(json)}`);
    returned += count(json.data);
  }
  return { wall_ms: summary(wall), mean_results: round(returned / texts.length) };
}

const embedder = await getEmbedder();
if (!embedder) throw new Error("No embedding model: run `npm run models` first");
setRateLimiter(new MemoryRateLimiter({ regular: 1e9, heavy: 1e9, light: 1e9 }));

let distinctCache: { text: string; vector: number[] }[] | undefined;
async function distinctPassages() {
  if (distinctCache) return distinctCache;
  console.log(`embedding ${DISTINCT} distinct passages with ${embedder!.id}…`);
  const embedStarted = Date.now();
  const texts = Array.from({ length: DISTINCT }, passage);
  const vectors = await embedder!.embed(texts, "document");
  console.log(`  ${((Date.now() - embedStarted) / 1000).toFixed(0)} s`);
  distinctCache = texts.map((text, i) => ({ text, vector: vectors[i]! }));
  return distinctCache;
}

// A local stand-in for a hosted reranker with a fixed service time.
const fake = createServer((req, res) => {
  let raw = "";
  req.on("data", (c) => (raw += c));
  req.on("end", () => {
    const { documents } = JSON.parse(raw) as { documents: string[] };
    setTimeout(() => res.end(JSON.stringify({ results: documents.map((_, index) => ({ index, relevance_score: 1 / (index + 1) })) })), RERANK_MS);
  });
});
await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve));
const rerankUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;

const results: Record<string, unknown> = {};
for (const size of SIZES) {
  // BENCH_KEEP_DIR: keep the loaded embedded database between runs (profiling); reused when present.
  const keepDir = KEEP && !process.env.DATABASE_URL ? `${KEEP}-${size}` : undefined;
  const marker = keepDir ? path.join(keepDir, "bench.json") : undefined;
  const reuse = marker !== undefined && existsSync(marker);
  const { database, label, drop } = await freshDatabase({ prefix: "bench-recall", dataDir: keepDir && path.join(keepDir, "pglite") });
  setDatabase(database);
  let key: string;
  if (reuse) {
    key = (JSON.parse(readFileSync(marker, "utf8")) as { key: string }).key;
    console.log(`size ${size} chunks: reusing ${keepDir}`);
  } else {
    const now = new Date();
    const { user, hub, extra } = await createUser(database.prisma, { email: `bench-${size}@example.test`, name: "Bench" }, now, (tx, created) =>
      insertApiKey(tx, created.user.id, "bench", now),
    );
    key = extra.key;
    // The caller reads three hubs; two more hubs hold other tenants' chunks the filters must skip.
    const hubIds = [hub.id];
    for (let i = 0; i < 4; i++) {
      const id = newId();
      await database.prisma.hub.create({ data: { id, name: `Hub ${i}`, slug: `bench-hub-${size}-${i}`, hubType: "team", ownerId: user.id } });
      if (i < 2) await database.prisma.hubMember.create({ data: { hubId: id, userId: user.id, role: "owner" } });
      hubIds.push(id);
    }
    console.log(`size ${size} chunks (${Math.ceil(size / PER_MEMORY)} memories, ${PER_MEMORY} chunks each, 5 hubs, caller reads 3), ${label}:`);
    await load(database, hubIds, user.id, size, await distinctPassages());
    if (marker) writeFileSync(marker, JSON.stringify({ key }));
  }
  const pool = queryTexts(QUERY_COUNT + 60 + WARMUP);
  const texts = pool.slice(0, QUERY_COUNT);
  const rerankTexts = pool.slice(QUERY_COUNT, QUERY_COUNT + 60);
  setReranker(null);
  // Warm-up with other texts: model, plans, and the hub read into the lexical index.
  await measure(key, pool.slice(QUERY_COUNT + 60), { no_rerank: true });
  await lexicalIndexFor(database.sql).settled();
  // Cold: the first time these recalls run, pages they need may still be on disk.
  const cold = await measure(key, texts, { no_rerank: true });
  // Steady state, as on a server that has been running: the database's pages are in its buffer
  // cache. Query embeddings are computed again (their cache is cleared).
  clearQueryVectorCache();
  const stages = BREAKDOWN ? timeStages(database, embedder!) : undefined;
  const profiler = PROFILE ? new Session() : undefined;
  if (profiler) {
    profiler.connect();
    await profiler.post("Profiler.enable");
    await profiler.post("Profiler.start");
  }
  const noRerank = await measure(key, texts, { no_rerank: true });
  if (profiler) {
    const { profile } = await profiler.post("Profiler.stop");
    writeFileSync(PROFILE!, JSON.stringify(profile));
    profiler.disconnect();
    console.log(`steady pass profile written to ${PROFILE}`);
  }
  if (stages) stages.print(texts.length, noRerank.server_latency_ms);
  const search = await measureQuick(key, texts, searchRoute, "/v1/memories/search", (data) => (data as unknown[]).length);
  const bar = await measureQuick(key, texts, barRoute, "/v1/bar/search", (data) => {
    const { memories, topics, hubs } = data as { memories: unknown[]; topics: unknown[]; hubs: unknown[] };
    return memories.length + topics.length + hubs.length;
  });
  setReranker(createHttpReranker({ baseUrl: rerankUrl, model: "bench-fake" }));
  await measure(key, rerankTexts, {});
  clearQueryVectorCache();
  const rerank = await measure(key, rerankTexts, {});
  results[`${size}_chunks`] = { no_rerank: noRerank, no_rerank_cold: cold, [`rerank_fake_${RERANK_MS}ms`]: rerank, search, bar_search: bar };
  console.log(JSON.stringify(results[`${size}_chunks`], null, 2));
  setDatabase(undefined);
  await database.close();
  await drop();
}
fake.close();

mkdirSync("bench/results", { recursive: true });
const file = path.join("bench/results", `recall-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
writeFileSync(file, JSON.stringify({ node: process.version, database: process.env.DATABASE_URL ? "postgres" : "pglite", sizes: SIZES, per_memory: PER_MEMORY, queries: QUERY_COUNT, warmup: WARMUP, distinct: DISTINCT, results }, null, 2));
console.log(`written ${file}`);
process.exit(0);
