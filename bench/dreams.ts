// npm run bench:dreams — one dream run over a 10k-memory hub on a fresh on-disk embedded
// database (PGlite + pgvector), no chat model. Never part of npm test. Target: ≤ 60 s.
//
// The hub is synthetic (this set measures time only; the thresholds were fitted on the planted
// pairs of tests/dreams.test.ts): BENCH_THEMES themes, each with its own vocabulary and a random
// 384-d direction; a memory is a sentence from its theme's words with a unit embedding near the
// theme direction. Planted on top: 2% near-duplicates (one word changed, embedding perturbed
// slightly), 1% contradiction pairs (one setting, two values), 10% stale (old, never read), 20%
// already in topics, the rest unsorted. Rows are bulk-inserted with SQL; embeddings are not
// computed by the model (10k real embeddings take minutes and are not what is measured).
//
//   BENCH_MEMORIES  memories in the hub (default 10000)
//   BENCH_THEMES    themes (default 40)
//   BENCH_RUNS      runs measured one after another on the same hub (default 2: the first does
//                   the work, the second is the steady state of a daily run with nothing new)
//   BENCH_KEEP_DIR  keep the loaded hub there and start later benches from a copy of it
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { openDatabase, setDatabase } from "@/lib/db/database.ts";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { newId } from "@/lib/ids.ts";
import { createUser } from "@/lib/users/create-user.ts";

const N = Number(process.env.BENCH_MEMORIES ?? 10_000);
const THEMES = Number(process.env.BENCH_THEMES ?? 40);
const RUNS = Number(process.env.BENCH_RUNS ?? 2);
const DIM = 384;
const DAY = 86_400_000;

let seed = 7;
const random = () => {
  seed = (seed * 1664525 + 1013904223) % 4294967296;
  return seed / 4294967296;
};
const gaussian = () => Math.sqrt(-2 * Math.log(random() || 1e-12)) * Math.cos(2 * Math.PI * random());
const unit = (v: number[]) => {
  const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0)) || 1;
  return v.map((x) => x / n);
};
const near = (v: number[], noise: number) => unit(v.map((x) => x + gaussian() * noise));
const pick = <T>(list: T[]) => list[Math.floor(random() * list.length)]!;
const syllables = ["ka", "lo", "mi", "ra", "ten", "vo", "zu", "pel", "dor", "shi", "an", "ber", "cul", "fin", "gor", "hex"];
const word = () => Array.from({ length: 2 + Math.floor(random() * 2) }, () => pick(syllables)).join("");

const themes = Array.from({ length: THEMES }, () => ({ direction: unit(Array.from({ length: DIM }, gaussian)), words: Array.from({ length: 40 }, word) }));
const common = Array.from({ length: 200 }, word);

interface Row {
  id: string;
  content: string;
  embedding: number[];
  createdAt: Date;
  topic: number | null;
}

function sentence(theme: (typeof themes)[number]): string {
  const words = Array.from({ length: 10 }, () => pick(theme.words)).concat(Array.from({ length: 4 }, () => pick(common)));
  return `${words.join(" ")}.`;
}

function buildRows(): Row[] {
  const rows: Row[] = [];
  const now = Date.now();
  const dups = Math.floor(N * 0.02);
  const contradictions = Math.floor(N * 0.01 / 2);
  const base = N - dups - contradictions * 2;
  for (let i = 0; i < base; i++) {
    const t = Math.floor(random() * THEMES);
    const stale = i % 10 === 0;
    rows.push({
      id: newId(),
      content: sentence(themes[t]!),
      embedding: near(themes[t]!.direction, 0.055),
      createdAt: new Date(stale ? now - 200 * DAY : now - Math.floor(random() * 30) * DAY),
      topic: i % 5 === 1 ? t % 10 : null,
    });
  }
  for (let i = 0; i < dups; i++) {
    const original = rows[Math.floor(random() * base)]!;
    const words = original.content.slice(0, -1).split(" ");
    words[Math.floor(random() * words.length)] = pick(common);
    rows.push({ id: newId(), content: `${words.join(" ")}.`, embedding: near(original.embedding, 0.008), createdAt: new Date(original.createdAt.getTime() + 60_000), topic: null });
  }
  for (let i = 0; i < contradictions; i++) {
    const t = themes[i % THEMES]!;
    const setting = `The ${pick(t.words)} ${pick(t.words)} ${pick(t.words)} timeout`;
    const direction = near(t.direction, 0.02);
    rows.push({ id: newId(), content: `${setting} is ${10 + i} seconds.`, embedding: near(direction, 0.005), createdAt: new Date(now - 5 * DAY), topic: null });
    rows.push({ id: newId(), content: `${setting} is ${20 + i} seconds.`, embedding: near(direction, 0.005), createdAt: new Date(now - 4 * DAY), topic: null });
  }
  return rows;
}

const KEEP = process.env.BENCH_KEEP_DIR;
const dataDir = mkdtempSync(path.join(tmpdir(), "engram-bench-dreams-"));
let database: Awaited<ReturnType<typeof openDatabase>>;
let hubId: string;
let userId: string;
if (KEEP && existsSync(path.join(KEEP, "bench.json"))) {
  cpSync(path.join(KEEP, "pglite"), path.join(dataDir, "pglite"), { recursive: true });
  ({ hubId, userId } = JSON.parse(readFileSync(path.join(KEEP, "bench.json"), "utf8")) as { hubId: string; userId: string });
  database = await openDatabase({ dataDir: path.join(dataDir, "pglite") });
  console.log(`reusing the hub loaded in ${KEEP}`);
} else {
  database = await openDatabase({ dataDir: path.join(dataDir, "pglite") });
  ({ hubId, userId } = await load(database));
  if (KEEP) {
    await database.close();
    mkdirSync(KEEP, { recursive: true });
    cpSync(path.join(dataDir, "pglite"), path.join(KEEP, "pglite"), { recursive: true });
    writeFileSync(path.join(KEEP, "bench.json"), JSON.stringify({ hubId, userId }));
    database = await openDatabase({ dataDir: path.join(dataDir, "pglite") });
  }
}
setDatabase(database);
const db = database.prisma;

async function load(database: Awaited<ReturnType<typeof openDatabase>>): Promise<{ hubId: string; userId: string }> {
  const db = database.prisma;
  // The HNSW index is built after loading (as bench/recall.ts does); dreams do not use it.
  const [hnsw] = await database.sql.query<{ indexdef: string }>(`SELECT indexdef FROM pg_indexes WHERE indexname = 'chunks_embedding_hnsw_idx'`);
  await database.sql.query(`DROP INDEX IF EXISTS chunks_embedding_hnsw_idx`);
  const now = new Date();
  const { user } = await createUser(db, { email: "bench-dreams@example.test", name: "Bench" }, now);
  const hubId = newId();
  await db.hub.create({ data: { id: hubId, name: "Bench hub", slug: "bench-dreams", hubType: "team", ownerId: user.id, members: { create: [{ userId: user.id, role: "owner" }] } } });
  const topicIds = Array.from({ length: 10 }, () => newId());
  await db.topic.createMany({ data: topicIds.map((id, i) => ({ id, hubId, name: `Existing topic ${i}` })) });

  const loadStart = performance.now();
  const rows = buildRows();
  for (let i = 0; i < rows.length; i += 1000) {
    const slice = rows.slice(i, i + 1000);
    await db.memory.createMany({
      data: slice.map((r) => ({
        id: r.id,
        hubId,
        ownerId: user.id,
        topicId: r.topic === null ? null : topicIds[r.topic]!,
        title: r.content.slice(0, 80),
        content: r.content,
        contentType: "text",
        contentHash: createHash("sha256").update(r.content).digest("hex"),
        kind: "semantic",
        stability: "evolving",
        state: "active",
        source: "import",
        processingStatus: "done",
        createdAt: r.createdAt,
        updatedAt: r.createdAt,
      })),
    });
    await database.sql.query(
      `INSERT INTO chunks (id, memory_id, hub_id, position, content, embedding)
       SELECT u.id, u.memory_id, $1::uuid, 0, u.content, u.embedding::vector
         FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::text[]) AS u(id, memory_id, content, embedding)`,
      [hubId, slice.map(() => newId()), slice.map((r) => r.id), slice.map((r) => r.content), slice.map((r) => `[${r.embedding.map((x) => x.toFixed(5)).join(",")}]`)],
    );
  }
  if (hnsw) await database.sql.query(hnsw.indexdef);
  console.log(`loaded ${rows.length} memories in ${((performance.now() - loadStart) / 1000).toFixed(1)} s (${THEMES} themes)`);
  return { hubId, userId: user.id };
}

const results = [];
for (let i = 0; i < RUNS; i++) {
  const { run_id } = await queueDreamRun(db, hubId, userId, new Date());
  const started = performance.now();
  await runDreamRunOnce(db, run_id, { config: dreamConfig() });
  const seconds = (performance.now() - started) / 1000;
  const run = await db.dreamRun.findUniqueOrThrow({ where: { id: run_id } });
  const counts = Object.fromEntries((await db.dreamAction.groupBy({ by: ["actionType"], where: { runId: run_id }, _count: { _all: true } })).map((g) => [g.actionType, g._count._all]));
  const result = { run: i + 1, status: run.status, seconds: Math.round(seconds * 10) / 10, memories_per_second: Math.round(run.memoriesScanned / seconds), scanned: run.memoriesScanned, actions: counts, phases: run.phaseMetrics };
  console.log(JSON.stringify(result, null, 2));
  results.push(result);
}
const first = results[0]!;
console.log(`dream run over ${N} memories: ${first.seconds} s (target ≤ 60 s) — ${first.seconds <= 60 ? "PASS" : "FAIL"}`);
mkdirSync("bench/results", { recursive: true });
const file = path.join("bench/results", `dreams-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
writeFileSync(file, JSON.stringify({ node: process.version, memories: N, themes: THEMES, results }, null, 2));
console.log(`written ${file}`);
setDatabase(undefined);
await database.close();
rmSync(dataDir, { recursive: true, force: true });
process.exit(first.seconds <= 60 ? 0 : 1);
