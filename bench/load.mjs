// npm run bench:load — the mixed workload (70% recall, 20% push, 10% list/get/hubs) from 32 clients against
// the built server, once on each database: the embedded PGlite and PostgreSQL (pg-server). Prints throughput
// and p50/p95/p99 per operation and phase, and the target (PostgreSQL: ≥ 300 req/s, recall p95 ≤ 100 ms,
// zero 5xx). Never builds (`npm run build` first).
//   BENCH_DURATION=300     seconds per database (default 5 minutes)
//   BENCH_CLIENTS=32       concurrent clients
//   BENCH_DATABASES=pglite,postgres
//   BENCH_SEED=0           memories pushed (and processed) before the measured phase; BENCH_SEED=10000 for the
//                          issue's 10k (processing them takes a while: ~5–10/s with the local model)
//   BENCH_PG_DIR, BENCH_PG_PORT  the pg-server cluster (default /tmp/engram-bench-pg, 54339)
//   BENCH_PG_SOCKET=1      reach PostgreSQL through its Unix socket instead of TCP on 127.0.0.1
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { root } from "./lib/server.mjs";
import { cpuMeter, createBenchUser, engramServer, env, freshPostgresDatabase, PhaseStats, pgServer, printPhase, seed, startWorkload, verify } from "./lib/campaign.mjs";

const DURATION = Number(env("BENCH_DURATION", 300));
const CLIENTS = Number(env("BENCH_CLIENTS", 32));
const SEED = Number(env("BENCH_SEED", 0));
const DATABASES = env("BENCH_DATABASES", "pglite,postgres").split(",").map((s) => s.trim()).filter(Boolean);
const PORT = Number(env("BENCH_PORT", 3143));
const SOCKET = env("BENCH_PG_SOCKET", "") === "1";

const results = [];
console.log(`bench:load — ${CLIENTS} clients, ${DURATION} s per database, seed ${SEED}, load average before: ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
for (const kind of DATABASES) {
  let database;
  if (kind === "postgres") database = await freshPostgresDatabase(pgServer().start(), "load");
  else if (kind !== "pglite") throw new Error(`unknown database ${kind}`);
  const server = engramServer({ port: PORT, databaseUrl: SOCKET ? database?.socketUrl : database?.url });
  try {
    const coldMs = await server.start();
    const key = await createBenchUser(server.base);
    if (SEED > 0) {
      const t = performance.now();
      await seed(server.base, key, SEED, 8, (n) => console.log(`  seeded ${n}/${SEED}`));
      const seeded = await verify(server.base, key, [], 6 * 3600_000);
      console.log(`  seeded ${seeded.memories} memories, processed in ${((performance.now() - t) / 1000).toFixed(0)} s`);
    }
    const phase = new PhaseStats(`${kind}${SOCKET && database ? " (Unix socket)" : ""} mixed`);
    const acked = [];
    const load0 = loadavg()[0];
    const meter = cpuMeter(server.pid);
    const workload = startWorkload({ base: () => server.base, key, clients: CLIENTS, phase: () => phase, acked });
    await new Promise((r) => setTimeout(r, DURATION * 1000));
    await workload.stop();
    phase.end();
    const measured = phase.summary();
    const summary = { database: kind, transport: database ? (SOCKET ? "unix socket" : "tcp") : "in-process", cold_start_ms: Math.round(coldMs), seed: SEED, load_average: [load0, loadavg()[0]], ...measured, cpu: meter.perRequest(measured.requests) };
    printPhase(summary);
    const check = await verify(server.base, key, acked, 600_000);
    console.log(`  after: ${check.memories} memories, ${check.acknowledged} acknowledged writes, lost ${check.lost}, duplicated ${check.duplicated}, stuck ${check.stuck}, failed ${check.failed}`);
    console.log(`  load average (1 min) at start / end of the phase: ${summary.load_average.map((l) => l.toFixed(2)).join(" / ")}`);
    results.push({ ...summary, check });
  } finally {
    await server.destroy();
    await database?.drop();
  }
}

let pass = true;
for (const r of results) {
  const recall = r.ops.recall ?? {};
  const checks = [
    [`zero 5xx`, r.server5xx === 0],
    [`no lost, duplicated or stuck writes`, r.check.pass],
    ...(r.database === "postgres" ? [[`≥ 300 req/s (${r.rps.toFixed(0)})`, r.rps >= 300], [`recall p95 ≤ 100 ms (${recall.p95?.toFixed(1)})`, recall.p95 <= 100]] : []),
  ];
  for (const [label, ok] of checks) {
    console.log(`${ok ? "PASS" : "FAIL"}  ${r.database}: ${label}`);
    pass &&= ok;
  }
}
const dir = path.join(root, "bench", "results");
mkdirSync(dir, { recursive: true });
writeFileSync(path.join(dir, "load.json"), JSON.stringify({ at: new Date().toISOString(), clients: CLIENTS, duration_s: DURATION, results }, null, 2));
console.log(pass ? "bench:load PASS" : "bench:load FAIL (targets above; measured on a shared 2-core machine, see the load averages)");
process.exit(pass ? 0 : 1);
