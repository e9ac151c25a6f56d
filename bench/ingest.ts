// npm run bench:ingest — create→processed latency and sustained processing throughput for ~5 KB
// markdown memories (`-- --files`: 20-page PDFs through uploads, see bench/ingest-files.ts), on a fresh on-disk embedded database with the local MiniLM model. Never part of npm test.
//
// Drives the real route handler (POST /v1/memories) in process, with the embedded runner started
// exactly as the server starts it, and reads processed_at from the database.
//
//   BENCH_LATENCY_COUNT  memories created one at a time, each waited for (default 50)
//   BENCH_BURST          memories created as fast as possible, then drained (default 2000)
//   BENCH_CLIENTS        concurrent creating clients during the burst (default 16)
//   plus every ENGRAM_PROCESSING_* / ENGRAM_EMBED_THREADS setting of the server.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import cliProgress from "cli-progress";
import { POST as createMemoryRoute } from "@/app/v1/memories/route.ts";
import { getEmbedder } from "@/lib/ai/embedder.ts";
import { setRateLimiter, MemoryRateLimiter } from "@/lib/api/rate-limit.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { openDatabase, setDatabase } from "@/lib/db/database.ts";
import { backgroundRunner, startBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { markdownMemory } from "./ingest-corpus.ts";

// `--files`: the upload→processed benchmark for PDFs instead (bench/ingest-files.ts).
if (process.argv.includes("--files")) {
  await import("./ingest-files.ts");
  process.exit(0);
}

const LATENCY_COUNT = Number(process.env.BENCH_LATENCY_COUNT ?? 50);
const BURST = Number(process.env.BENCH_BURST ?? 2000);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 16);

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { count: sorted.length, p50: percentile(sorted, 50), p95: percentile(sorted, 95), max: sorted.at(-1) ?? NaN };
};

const dataDir = mkdtempSync(path.join(tmpdir(), "engram-bench-ingest-"));
const database = await openDatabase({ dataDir });
setDatabase(database);
setRateLimiter(new MemoryRateLimiter({ regular: 1e9, heavy: 1e9, light: 1e9 }));
const now = new Date();
const { extra } = await createUser(database.prisma, { email: "bench@example.test", name: "Bench" }, now, (tx, created) =>
  insertApiKey(tx, created.user.id, "bench", now),
);
if (!(await getEmbedder())) throw new Error("No embedding model: run `npm run models` first");
await startBackgroundProcessing();
const runner = backgroundRunner();
if (!runner) throw new Error("the embedded runner did not start (is ENGRAM_PROCESSING=off or Inngest configured?)");

let sequence = 0;
async function create(): Promise<{ id: string; startedAt: number; createMs: number }> {
  const i = sequence++;
  const startedAt = Date.now();
  const t0 = performance.now();
  const res = await createMemoryRoute(
    new Request("http://bench.local/v1/memories", {
      method: "POST",
      headers: { authorization: `Bearer ${extra.key}`, "content-type": "application/json" },
      body: JSON.stringify({ content: markdownMemory(i) }),
    }),
    { params: Promise.resolve({}) },
  );
  const createMs = performance.now() - t0;
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${await res.text()}`);
  const { data } = (await res.json()) as { data: { id: string } };
  return { id: data.id, startedAt, createMs };
}

async function processedAt(ids: string[]): Promise<Map<string, number>> {
  const rows = await database.prisma.memory.findMany({
    where: { id: { in: ids }, processingStatus: { in: ["done", "failed"] } },
    select: { id: true, processedAt: true, processingStatus: true },
  });
  const failed = rows.filter((r) => r.processingStatus === "failed");
  if (failed.length) throw new Error(`${failed.length} memories failed processing`);
  return new Map(rows.map((r) => [r.id, r.processedAt!.getTime()]));
}

async function waitAll(ids: string[], bar?: cliProgress.SingleBar): Promise<Map<string, number>> {
  const done = new Map<string, number>();
  let waiting = ids;
  while (waiting.length) {
    for (let i = 0; i < waiting.length; i += 1000) for (const [id, t] of await processedAt(waiting.slice(i, i + 1000))) done.set(id, t);
    waiting = waiting.filter((id) => !done.has(id));
    bar?.update(done.size);
    if (waiting.length) await new Promise((r) => setTimeout(r, 50));
  }
  return done;
}

console.log(`bench:ingest — ${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}, ~5 KB markdown memories`);
const sample = markdownMemory(0);
console.log(`memory size ${Buffer.byteLength(sample)} bytes`);

// 1) Latency of a memory on an otherwise idle queue.
const latencies: number[] = [];
const createLatencies: number[] = [];
for (let i = 0; i < LATENCY_COUNT; i++) {
  const memory = await create();
  createLatencies.push(memory.createMs);
  const done = await waitAll([memory.id]);
  latencies.push(done.get(memory.id)! - memory.startedAt);
}
const idle = stats(latencies);
console.log(
  `idle:  create p50=${stats(createLatencies).p50.toFixed(1)} ms p95=${stats(createLatencies).p95.toFixed(1)} ms | ` +
    `create→processed p50=${idle.p50} ms p95=${idle.p95} ms max=${idle.max} ms (n=${idle.count})`,
);

// 2) Burst: clients create as fast as they can; the runner drains the backlog.
const burst: { id: string; startedAt: number; createMs: number }[] = [];
const bar = new cliProgress.SingleBar({ format: "burst  [{bar}] {value}/{total} processed | {duration}s" }, cliProgress.Presets.shades_classic);
const burstStart = Date.now();
await Promise.all(
  Array.from({ length: CLIENTS }, async () => {
    while (burst.length < BURST) {
      const slot = burst.length;
      burst.length++; // reserve the slot before awaiting
      burst[slot] = await create();
    }
  }),
);
const createdAt = Date.now();
bar.start(BURST, 0);
const done = await waitAll(
  burst.map((m) => m.id),
  bar,
);
bar.stop();
const finishedAt = Math.max(...done.values());
const burstLatency = stats(burst.map((m) => done.get(m.id)! - m.startedAt));
const createRate = BURST / ((createdAt - burstStart) / 1000);
const sustained = BURST / ((finishedAt - burstStart) / 1000);
const chunkRows = await database.sql.query<{ n: number; tokens: number }>(`SELECT count(*)::int AS n, avg(token_count)::int AS tokens FROM chunks`);
console.log(
  `burst: ${BURST} memories, ${CLIENTS} clients | creates ${createRate.toFixed(1)}/s (create p95 ${stats(burst.map((m) => m.createMs)).p95.toFixed(1)} ms) | ` +
    `processed ${sustained.toFixed(1)} memories/s sustained | create→processed p50=${burstLatency.p50} ms p95=${burstLatency.p95} ms`,
);
console.log(`chunks: ${chunkRows[0]!.n} (${(chunkRows[0]!.n / (BURST + LATENCY_COUNT)).toFixed(1)} per memory, ~${chunkRows[0]!.tokens} tokens each) | runner ${JSON.stringify(runner.stats)}`);

const result = {
  at: new Date().toISOString(),
  cores: cpus().length,
  loadavg: loadavg(),
  memoryBytes: Buffer.byteLength(sample),
  idle: { ...idle, createP50: stats(createLatencies).p50 },
  burst: { ...burstLatency, count: BURST, clients: CLIENTS, createRate, sustained },
  chunksPerMemory: chunkRows[0]!.n / (BURST + LATENCY_COUNT),
  env: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("ENGRAM_"))),
};
const resultsDir = path.join(import.meta.dirname, "results");
mkdirSync(resultsDir, { recursive: true });
writeFileSync(path.join(resultsDir, `ingest-${Date.now()}.json`), JSON.stringify(result, null, 2));
runner.stop();
await database.close();
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
