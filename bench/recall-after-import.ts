// npm run bench:recall-import — recall latency in the first minute after a bulk import on a fresh
// server: a new on-disk embedded database with the server's maintenance started (as `npm start`
// does), 2,000 short memories pushed through POST /v1/memories and processed by the real pipeline
// (chunks, local embeddings), then POST /v1/recall measured at once and every 20 s for a minute.
// Never part of npm test.
//
//   BENCH_IMPORT       memories imported (default 2000)
//   BENCH_QUERIES      recalls per time slot (default 60)
//   BENCH_NO_ANALYZE=1 do not start the maintenance (what a fresh server did before autoanalyze)
//   BENCH_KEEP=1       keep the database directory (printed) for a closer look afterwards
//   BENCH_BREAKDOWN=1  also print each slot's mean time per recall of the query embedding and each raw SQL statement
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { getEmbedder } from "@/lib/ai/embedder.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { openDatabase, setDatabase } from "@/lib/db/database.ts";
import { startEmbeddedMaintenance } from "@/lib/db/embedded-maintenance.ts";
import { claimMemory, processMemory } from "@/lib/processing/process-memory.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { clearQueryVectorCache } from "@/lib/recall/embed-query.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { MEMORIES, QUERIES } from "../eval/corpus.ts";
import { dispatch } from "../tests/support/router.ts";
import { timeStages } from "./lib/time-stages.ts";

const IMPORT = Number(process.env.BENCH_IMPORT ?? 2000);
const QUERY_COUNT = Number(process.env.BENCH_QUERIES ?? 60);
const NO_ANALYZE = process.env.BENCH_NO_ANALYZE === "1";
const BREAKDOWN = process.env.BENCH_BREAKDOWN === "1";

let seed = 7;
const random = () => {
  seed = (seed * 1664525 + 1013904223) % 4294967296;
  return seed / 4294967296;
};
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
const round = (n: number) => Math.round(n * 10) / 10;
const summary = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: round(percentile(sorted, 50)), p95: round(percentile(sorted, 95)), max: round(sorted.at(-1) ?? NaN) };
};

const sentences = MEMORIES.flatMap((m) => m.content.split(/(?<=[.!?])\s+|\n+/).filter((s) => s.trim().length > 20 && !s.startsWith("#")));
const shortMemory = (i: number) => `${sentences[Math.floor(random() * sentences.length)]} ${sentences[Math.floor(random() * sentences.length)]} (note ${i})`;
const baseQueries = QUERIES.map((q) => (typeof q.query === "function" ? q.query(new Date()) : q.query));

const embedder = await getEmbedder();
if (!embedder) throw new Error("No embedding model: run `npm run models` first");
setRateLimiter(new MemoryRateLimiter({ regular: 1e9, heavy: 1e9, light: 1e9 }));
const dataDir = mkdtempSync(path.join(tmpdir(), "engram-bench-import-"));
const database = await openDatabase({ dataDir: path.join(dataDir, "pglite") });
setDatabase(database);
if (!NO_ANALYZE) startEmbeddedMaintenance(database);
const now = new Date();
const { extra } = await createUser(database.prisma, { email: "import@example.test", name: "Import" }, now, (tx, created) => insertApiKey(tx, created.user.id, "bench", now));
const call = async (pathname: string, body: unknown) => {
  const res = await dispatch(
    new Request(`http://bench.test${pathname}`, { method: "POST", headers: { authorization: `Bearer ${extra.key}`, "content-type": "application/json" }, body: JSON.stringify(body) }),
  );
  return { status: res.status, body: (await res.json()) as any };
};

console.log(`importing ${IMPORT} short memories through POST /v1/memories${NO_ANALYZE ? " (no maintenance: BENCH_NO_ANALYZE=1)" : ""}…`);
const started = Date.now();
const ids: string[] = [];
for (let i = 0; i < IMPORT; i++) {
  const res = await call("/v1/memories", { content: shortMemory(i), source: "import" });
  if (res.status !== 201) throw new Error(`push failed: ${JSON.stringify(res.body)}`);
  ids.push(res.body.data.id);
}
const pushed = Date.now();
const config = processingConfig();
for (const id of ids) {
  const claim = await claimMemory(database.prisma, id, { now: new Date(), staleBefore: new Date(0), maxAttempts: config.maxAttempts, retryBaseMs: config.retryBaseMs });
  if (claim) await processMemory(database.prisma, claim, config);
}
console.log(`  pushed in ${((pushed - started) / 1000).toFixed(0)} s, processed in ${((Date.now() - pushed) / 1000).toFixed(0)} s`);

const stats = async () =>
  (await database.sql.query<{ relname: string; analyzed: Date | null }>(
    `SELECT relname, coalesce(last_analyze, last_autoanalyze, last_vacuum) AS analyzed FROM pg_stat_user_tables WHERE relname IN ('chunks', 'memories') ORDER BY relname`,
  )).map((r) => `${r.relname} ${r.analyzed ? "analysed" : "never analysed"}`);

const slots: Record<string, unknown> = {};
const importDone = Date.now();
for (const at of [0, 20, 40, 60]) {
  const wait = importDone + at * 1000 - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  clearQueryVectorCache();
  const server: number[] = [];
  const stages = BREAKDOWN ? timeStages(database, embedder) : undefined;
  for (let i = 0; i < QUERY_COUNT; i++) {
    const query = `${baseQueries[Math.floor(random() * baseQueries.length)]}`;
    const res = await call("/v1/recall", { query, no_rerank: true });
    if (res.status !== 200) throw new Error(`recall failed: ${JSON.stringify(res.body)}`);
    server.push(res.body.data.query_metadata.latency_ms);
    await flushAccess();
  }
  stages?.print(QUERY_COUNT, summary(server));
  slots[`t+${at}s`] = { server_latency_ms: summary(server), statistics: await stats() };
  console.log(`t+${at}s`, JSON.stringify(slots[`t+${at}s`]));
}
setDatabase(undefined);
await database.close();
if (process.env.BENCH_KEEP === "1") console.log(`kept the database in ${dataDir}`);
else rmSync(dataDir, { recursive: true, force: true });
mkdirSync("bench/results", { recursive: true });
const file = path.join("bench/results", `recall-after-import-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
writeFileSync(file, JSON.stringify({ node: process.version, import: IMPORT, queries: QUERY_COUNT, no_analyze: NO_ANALYZE, slots }, null, 2));
console.log(`written ${file}`);
process.exit(0);
