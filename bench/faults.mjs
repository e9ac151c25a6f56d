// npm run bench:faults — the bench:load workload while the server is killed with kill -9 every 30 s and
// restarted, and (PostgreSQL) the database server is restarted once mid-run (pg-server stop / start). Then:
// every acknowledged write is present exactly once and every memory reaches done or failed (the issue's
// target: 0 lost, 0 duplicated, 0 stuck). Prints throughput, p50/p95/p99 and errors per phase (a phase is the
// time between two faults). Never builds (`npm run build` first).
//   BENCH_DURATION=300  seconds per database        BENCH_KILL_EVERY=30  seconds between kills
//   BENCH_CLIENTS=32    BENCH_DATABASES=pglite,postgres    BENCH_SEED=0 (see bench/load.mjs)
//   BENCH_SETTLE=300    seconds allowed afterwards for every memory to reach done or failed (longer while
//                       memories keep finishing, up to 3x: see verify in bench/lib/campaign.mjs)
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { root } from "./lib/server.mjs";
import { createBenchUser, engramServer, env, freshPostgresDatabase, PhaseStats, pgServer, printPhase, seed, sleep, startWorkload, verify } from "./lib/campaign.mjs";

const DURATION = Number(env("BENCH_DURATION", 300));
const KILL_EVERY = Number(env("BENCH_KILL_EVERY", 30));
const CLIENTS = Number(env("BENCH_CLIENTS", 32));
const SEED = Number(env("BENCH_SEED", 0));
const SETTLE = Number(env("BENCH_SETTLE", 300));
const DATABASES = env("BENCH_DATABASES", "pglite,postgres").split(",").map((s) => s.trim()).filter(Boolean);
const PORT = Number(env("BENCH_PORT", 3144));

// A campaign that stops making progress fails instead of holding CI until its deadline: each phase,
// restart and settle wait is bounded (the settle wait by 3 × BENCH_SETTLE), so their sum plus a margin
// of five minutes per database and overall means something hangs (CI's bounds: 41 minutes).
const WATCHDOG_S = DATABASES.length * (DURATION + 3 * SETTLE + 300) + 300;
setTimeout(() => {
  console.error(`bench:faults: no result after ${WATCHDOG_S} s; giving up (something hangs)`);
  process.exit(2);
}, WATCHDOG_S * 1000).unref();

const results = [];
console.log(`bench:faults — ${CLIENTS} clients, ${DURATION} s per database, kill -9 every ${KILL_EVERY} s, load average before: ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
for (const kind of DATABASES) {
  const pgs = kind === "postgres" ? pgServer() : undefined;
  const database = pgs ? await freshPostgresDatabase(pgs.start(), "faults") : undefined;
  if (!pgs && kind !== "pglite") throw new Error(`unknown database ${kind}`);
  // The sweeper looks every 5 s (default 30) so the check afterwards need not wait long; the lease stays at its default.
  const server = engramServer({ port: PORT, databaseUrl: database?.url, extraEnv: { ENGRAM_PROCESSING_SWEEP_SECONDS: "5" } });
  const phases = [];
  const faults = [];
  try {
    await server.start();
    const key = await createBenchUser(server.base);
    if (SEED > 0) {
      await seed(server.base, key, SEED, 8, (n) => console.log(`  seeded ${n}/${SEED}`));
      await verify(server.base, key, [], 6 * 3600_000);
    }
    let current = new PhaseStats(`${kind} start`);
    phases.push(current);
    const acked = [];
    const workload = startWorkload({ base: () => server.base, key, clients: CLIENTS, phase: () => current, acked });
    const started = Date.now();
    const dbRestartAt = DURATION / 2;
    let dbRestarted = !pgs;
    let kills = 0;
    while ((Date.now() - started) / 1000 + KILL_EVERY <= DURATION) {
      const nextFault = started + (kills + 1) * KILL_EVERY * 1000;
      await sleep(Math.max(0, nextFault - Date.now()));
      current.end();
      const elapsed = (Date.now() - started) / 1000;
      if (!dbRestarted && elapsed >= dbRestartAt) {
        // The database server goes away under load and comes back; the Engram server stays up and reconnects.
        dbRestarted = true;
        const t = performance.now();
        current = new PhaseStats(`${kind} database restart`);
        phases.push(current);
        await pgs.stop();
        await sleep(3000);
        pgs.start();
        faults.push({ at_s: Math.round(elapsed), fault: "database restart", database_down_ms: Math.round(performance.now() - t) });
        console.log(`  ${elapsed.toFixed(0)} s: database server restarted`);
        kills++;
        continue;
      }
      const t = performance.now();
      await server.kill("SIGKILL");
      current = new PhaseStats(`${kind} after kill ${++kills}`);
      phases.push(current);
      const restartMs = await server.start();
      faults.push({ at_s: Math.round(elapsed), fault: "kill -9 + restart", unavailable_ms: Math.round(performance.now() - t), restart_ms: Math.round(restartMs) });
      console.log(`  ${elapsed.toFixed(0)} s: kill -9, back after ${(performance.now() - t).toFixed(0)} ms`);
    }
    await sleep(Math.max(0, started + DURATION * 1000 - Date.now()));
    await workload.stop();
    current.end();
    const summaries = phases.map((p) => p.summary());
    for (const s of summaries) printPhase(s);
    const check = await verify(server.base, key, acked, SETTLE * 1000);
    console.log(
      `\n  ${kind}: ${check.memories} memories, ${check.acknowledged} acknowledged writes — lost ${check.lost}, duplicated ${check.duplicated}, stuck ${check.stuck} (failed ${check.failed}${check.failed ? `: ${JSON.stringify(check.failures)}` : ""}); all settled ${check.stuck ? "not " : ""}within ${check.waited_s} s after the workload${check.stuck ? `; still unfinished: ${JSON.stringify(check.stuck_statuses)}` : ""}`,
    );
    const errors5xx = summaries.reduce((n, s) => n + s.server5xx, 0);
    results.push({ database: kind, faults, phases: summaries, check, server5xx: errors5xx, load_average_end: loadavg()[0] });
  } catch (error) {
    console.error(server.log().slice(-4000));
    throw error;
  } finally {
    // The server's own account of the run (errors behind any 5xx), next to the figures.
    mkdirSync(path.join(root, "bench", "results"), { recursive: true });
    writeFileSync(path.join(root, "bench", "results", `faults-${kind}-server.log`), server.log());
    await server.destroy();
    if (pgs) pgs.start(); // whatever happened, leave the cluster running as found
    await database?.drop();
  }
}

let pass = true;
for (const r of results) {
  const ok = r.check.pass;
  console.log(`${ok ? "PASS" : "FAIL"}  ${r.database}: 0 lost (${r.check.lost}), 0 duplicated (${r.check.duplicated}), 0 stuck (${r.check.stuck}) of ${r.check.acknowledged} acknowledged writes; 5xx during faults: ${r.server5xx}`);
  pass &&= ok;
}
const dir = path.join(root, "bench", "results");
mkdirSync(dir, { recursive: true });
writeFileSync(path.join(dir, "faults.json"), JSON.stringify({ at: new Date().toISOString(), clients: CLIENTS, duration_s: DURATION, kill_every_s: KILL_EVERY, results }, null, 2));
console.log(pass ? "bench:faults PASS" : "bench:faults FAIL");
process.exit(pass ? 0 : 1);
