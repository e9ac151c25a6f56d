// Shared by bench/load.mjs and bench/faults.mjs: the built server as `npm start` runs it (scripts/server.mjs),
// on the embedded database or on pg-server's PostgreSQL, a mixed workload from N clients, and the checks
// that every acknowledged write is present exactly once and every memory ends done or failed.
import { spawn, execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { percentile, root } from "./server.mjs";

export const ADMIN_TOKEN = "bench-admin-token-at-least-32-characters";
export const env = (name, fallback) => (process.env[name] === undefined || process.env[name] === "" ? fallback : process.env[name]);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** pg-server (../shared/tools/pg-server beside the checkout); BENCH_PG_DIR / BENCH_PG_PORT choose the cluster. */
export function pgServer() {
  const candidates = [env("BENCH_PG_SERVER", ""), path.resolve(root, "..", "shared", "tools", "pg-server"), "/work/shared/tools/pg-server"].filter(Boolean);
  const bin = candidates.find((c) => existsSync(c));
  if (!bin) throw new Error("pg-server not found: set BENCH_PG_SERVER to ../shared/tools/pg-server");
  const dir = env("BENCH_PG_DIR", "/tmp/engram-bench-pg");
  const port = env("BENCH_PG_PORT", "54339");
  return {
    start() {
      const out = execFileSync(bin, ["start", dir, port], { encoding: "utf8" });
      return out.trim().split("\n").at(-1).replace(/^DATABASE_URL=/, "");
    },
    /**
     * Asynchronous, so the workload keeps running (and failing) while the cluster goes down: a fast
     * shutdown can take up to pg_ctl's 60 s, and a blocked event loop would fire every client's
     * timeout at once when it ends.
     */
    async stop() {
      await promisify(execFile)(bin, ["stop", dir]);
    },
  };
}

/** A fresh database on the cluster (dropped by the returned function). */
export async function freshPostgresDatabase(serverUrl, label) {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  const name = `engram_${label}_${Date.now().toString(36)}`;
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  // The same database through the cluster's Unix socket (pg-server listens on one in its directory):
  // a host on the same machine skips the TCP loopback stack on every statement.
  const socket = new URL(url);
  socket.host = "";
  socket.search = `?host=${encodeURIComponent(env("BENCH_PG_DIR", "/tmp/engram-bench-pg"))}&port=${url.port || 5432}`;
  return {
    url: url.toString(),
    socketUrl: socket.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

// Extra node flags for the server process, e.g. BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"
// (Node refuses --cpu-prof in NODE_OPTIONS).
const SERVER_NODE_ARGS = env("BENCH_SERVER_NODE_ARGS", "").split(/\s+/).filter(Boolean);

/** The built server (what `npm start` runs), restartable on the same database. Never builds. */
export function engramServer({ port, databaseUrl, extraEnv = {} }) {
  if (!existsSync(path.join(root, ".next", "BUILD_ID"))) throw new Error("No production build: run `npm run build` first (benchmarks never build).");
  const dataDir = databaseUrl ? undefined : mkdtempSync(path.join(tmpdir(), "engram-campaign-"));
  const base = `http://127.0.0.1:${port}`;
  let child;
  let log = "";
  return {
    base,
    get pid() {
      return child?.pid;
    },
    log: () => log,
    async start(timeoutMs = 120_000) {
      const started = performance.now();
      child = spawn(process.execPath, [...SERVER_NODE_ARGS, path.join(root, "scripts", "server.mjs")], {
        cwd: root,
        env: {
          ...process.env,
          PORT: String(port),
          HOSTNAME: "127.0.0.1",
          NODE_ENV: "production",
          ENGRAM_ADMIN_TOKEN: ADMIN_TOKEN,
          ENGRAM_RATE_LIMIT_REGULAR: "1000000000",
          ENGRAM_RATE_LIMIT_HEAVY: "1000000000",
          ENGRAM_RATE_LIMIT_LIGHT: "1000000000",
          ...(databaseUrl ? { DATABASE_URL: databaseUrl } : { ENGRAM_DATA_DIR: dataDir, DATABASE_URL: "" }),
          ...extraEnv,
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      const mine = child;
      mine.stdout.on("data", (d) => (log = (log + d).slice(-200_000)));
      mine.stderr.on("data", (d) => (log = (log + d).slice(-200_000)));
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (mine.exitCode !== null) throw new Error(`server exited early:\n${log.slice(-4000)}`);
        try {
          if ((await fetch(`${base}/v1/health`, { signal: AbortSignal.timeout(2000) })).ok) break;
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline) throw new Error(`server not healthy after ${timeoutMs} ms:\n${log.slice(-4000)}`);
        await sleep(50);
      }
      return performance.now() - started;
    },
    async kill(signal = "SIGKILL") {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill(signal);
      await exited;
    },
    async destroy() {
      await this.kill("SIGTERM");
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function createBenchUser(base, email = "load@example.test") {
  const res = await fetch(`${base}/v1/admin/users`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ email, name: "Load" }),
  });
  if (res.status !== 201) throw new Error(`admin user: ${res.status} ${await res.text()}`);
  return (await res.json()).data.api_key;
}

const TOPICS = ["deploy", "billing", "search", "auth", "queue", "cache", "backup", "alerts"];
export function noteText(tag) {
  const n = Number.parseInt(tag.replace(/\D/g, "").slice(-6) || "0", 10);
  const topic = TOPICS[n % TOPICS.length];
  return `# ${topic} note ${tag}\n\nThe ${topic} runbook step ${n % 50} says to check the dashboard, then restart worker ${n % 13} ` +
    `if the queue depth exceeds ${100 + (n % 50)}.\n\n- owner: team-${n % 7}\n- ticket: ENG-${10_000 + (n % 9000)}\n`;
}
const QUERIES = TOPICS.flatMap((t) => [`how do I restart the ${t} worker`, `${t} queue depth too high`, `who owns the ${t} runbook`]);

/** Pushes `count` memories with `concurrency` clients (source paths make retries idempotent). */
export async function seed(base, key, count, concurrency = 8, onProgress = () => {}) {
  let next = 0;
  let done = 0;
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < count; i = next++) {
        for (let attempt = 0; ; attempt++) {
          try {
            const res = await fetch(`${base}/v1/memories`, { method: "POST", headers, body: JSON.stringify({ content: noteText(`seed${i}`), source_path: `seed/${i}.md` }) });
            if (res.status === 200 || res.status === 201) break;
            if (attempt > 5) throw new Error(`seed push ${i}: ${res.status} ${await res.text()}`);
          } catch (error) {
            if (attempt > 5) throw error;
          }
          await sleep(200);
        }
        if (++done % 500 === 0) onProgress(done);
      }
    }),
  );
}

/** Latencies and outcomes of one phase, by operation. */
export class PhaseStats {
  constructor(name) {
    this.name = name;
    this.started = performance.now();
    this.ended = undefined;
    this.ops = new Map();
  }
  record(op, ms, outcome) {
    let entry = this.ops.get(op);
    if (!entry) this.ops.set(op, (entry = { latencies: [], statuses: {}, errors: 0, server5xx: 0 }));
    if (typeof outcome === "number") {
      entry.statuses[outcome] = (entry.statuses[outcome] ?? 0) + 1;
      if (outcome >= 500) entry.server5xx++;
      if (outcome >= 400) entry.errors++;
      else entry.latencies.push(ms);
    } else {
      entry.statuses[outcome] = (entry.statuses[outcome] ?? 0) + 1;
      entry.errors++;
    }
  }
  end() {
    this.ended ??= performance.now();
  }
  summary() {
    const seconds = ((this.ended ?? performance.now()) - this.started) / 1000;
    const rows = {};
    let total = 0;
    let errors = 0;
    let server5xx = 0;
    const all = [];
    for (const [op, e] of this.ops) {
      const sorted = [...e.latencies].sort((a, b) => a - b);
      const n = sorted.length + e.errors;
      total += n;
      errors += e.errors;
      server5xx += e.server5xx;
      all.push(...sorted);
      rows[op] = { requests: n, rps: n / seconds, p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99), errors: e.errors, statuses: e.statuses };
    }
    all.sort((a, b) => a - b);
    return { phase: this.name, seconds, requests: total, rps: total / seconds, p50: percentile(all, 50), p95: percentile(all, 95), p99: percentile(all, 99), errors, server5xx, ops: rows };
  }
}

/**
 * CPU spent while a phase runs, to show where a request's time goes on this machine: the whole
 * machine (every core, from /proc/stat), the Engram server process, and this benchmark's own client.
 * The rest is the database (PGlite runs inside the server process) and background noise. Linux only;
 * clock ticks are taken as 10 ms (USER_HZ 100, the kernel's fixed value for user space).
 */
export function cpuMeter(serverPid) {
  const tick = 10;
  const machine = () => {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) * tick; // user nice system irq softirq steal
  };
  const server = () => {
    const stat = readFileSync(`/proc/${serverPid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(") ") + 2).split(" "); // after "pid (comm) ", comm may hold ") "
    return (Number(f[11]) + Number(f[12])) * tick;
  };
  const client = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const start = { machine: machine(), server: server(), client: client() };
  return {
    /** ms of CPU per request since the meter started, and the request rate the machine's cores allow at that cost. */
    perRequest(requests) {
      const used = { machine: machine() - start.machine, server: server() - start.server, client: client() - start.client };
      const engram = Math.max(0, used.machine - used.client);
      const n = Math.max(1, requests);
      const cores = cpus().length;
      return {
        cores,
        engram_ms: engram / n,
        server_process_ms: used.server / n,
        other_ms: Math.max(0, engram - used.server) / n,
        client_ms: used.client / n,
        ceiling_rps: engram > 0 ? (cores * 1000 * n) / engram : Infinity,
      };
    },
  };
}

export function printPhase(summary) {
  const f = (x) => (Number.isFinite(x) ? x.toFixed(1).padStart(7) : "      –");
  console.log(`\n[${summary.phase}] ${summary.seconds.toFixed(0)} s, ${summary.requests} requests, ${summary.rps.toFixed(0)} req/s, errors ${summary.errors} (5xx ${summary.server5xx})`);
  console.log(`  ${"op".padEnd(8)} ${"req".padStart(7)} ${"req/s".padStart(7)} ${"p50".padStart(7)} ${"p95".padStart(7)} ${"p99".padStart(7)}  errors / statuses`);
  for (const [op, r] of Object.entries(summary.ops)) {
    console.log(`  ${op.padEnd(8)} ${String(r.requests).padStart(7)} ${f(r.rps)} ${f(r.p50)} ${f(r.p95)} ${f(r.p99)}  ${r.errors} ${JSON.stringify(r.statuses)}`);
  }
  if (summary.cpu) {
    const c = summary.cpu;
    console.log(
      `  CPU per request: ${c.engram_ms.toFixed(1)} ms (server process ${c.server_process_ms.toFixed(1)}, database and rest ${c.other_ms.toFixed(1)}; ` +
        `benchmark client ${c.client_ms.toFixed(1)} excluded) -> at most ~${c.ceiling_rps.toFixed(0)} req/s on ${c.cores} cores`,
    );
  }
}

/**
 * The mixed workload: each client loops 70% recall, 20% push, 10% list / get / hubs. A push that got no
 * answer (connection refused or reset, timeout) is retried with the same source_path until acknowledged,
 * as a careful client would; `acked` collects every acknowledged write.
 */
export function startWorkload({ base, key, clients = 32, phase, acked }) {
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const known = [];
  let stopped = false;
  let seq = 0;
  const call = async (op, route, init) => {
    const started = performance.now();
    const attempt = (async () => {
      const res = await fetch(`${base()}${route}`, { ...init, headers, signal: AbortSignal.timeout(20_000) });
      return { status: res.status, body: await res.text() };
    })();
    // The signal should end every request, but a fetch whose connection died while it was being
    // aborted can stay pending for good (seen once after a database restart): a hard limit
    // keeps one such request from holding the campaign forever.
    let timer;
    const hardLimit = new Promise((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error("no answer in 30 s"), { name: "TimeoutError" })), 30_000);
    });
    try {
      const result = await Promise.race([attempt, hardLimit]);
      phase().record(op, performance.now() - started, result.status);
      return result;
    } catch (error) {
      phase().record(op, performance.now() - started, error?.name === "TimeoutError" ? "timeout" : "network");
      return { status: 0 };
    } finally {
      clearTimeout(timer);
      attempt.catch(() => {});
    }
  };
  const client = async (c) => {
    let pending; // an unacknowledged push, retried first
    while (!stopped) {
      const r = Math.random();
      if (pending || (r >= 0.7 && r < 0.9)) {
        const push = pending ?? { tag: `c${c}n${seq++}`, path: `load/c${c}/${seq}.md` };
        const res = await call("push", "/v1/memories", { method: "POST", body: JSON.stringify({ content: noteText(push.tag), source_path: push.path }) });
        if (res.status === 200 || res.status === 201) {
          const id = JSON.parse(res.body).data.id;
          acked.push({ id, path: push.path, tag: push.tag });
          known.push(id);
          pending = undefined;
        } else if (res.status === 0 || res.status >= 500) {
          pending = push;
          await sleep(100);
        } else pending = undefined;
      } else if (r < 0.7) {
        const res = await call("recall", "/v1/recall", { method: "POST", body: JSON.stringify({ query: QUERIES[Math.floor(Math.random() * QUERIES.length)], limit: 10 }) });
        if (res.status === 0) await sleep(100);
      } else {
        const which = Math.random();
        const res =
          which < 0.4 || known.length === 0
            ? await call("list", "/v1/memories?limit=20", { method: "GET" })
            : which < 0.8
              ? await call("get", `/v1/memories/${known[Math.floor(Math.random() * known.length)]}`, { method: "GET" })
              : await call("hubs", "/v1/hubs", { method: "GET" });
        if (res.status === 0) await sleep(100);
      }
    }
  };
  const running = Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
  return {
    async stop() {
      stopped = true;
      await running;
    },
  };
}

/** Every memory of the user, paged through the API. */
export async function listAll(base, key) {
  const all = [];
  let cursor = "";
  do {
    const res = await fetch(`${base}/v1/memories?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, {
      headers: { authorization: `Bearer ${key}` },
      signal: AbortSignal.timeout(60_000),
    });
    if (!res.ok) throw new Error(`list: ${res.status} ${await res.text()}`);
    const { data } = await res.json();
    all.push(...data.memories);
    cursor = data.next_cursor;
  } while (cursor);
  return all;
}

/**
 * Waits until no memory is pending or running, then checks the acknowledged writes: each present, each
 * source path exactly once. Returns the verdict and its numbers.
 *
 * "Stuck" means no progress, not slow: on a machine shared with other suites (CI runs at load average
 * 25-30) the embedded database's backlog can take longer than `timeoutMs` to drain while memories keep
 * finishing. So the wait goes on past `timeoutMs` as long as the unfinished count keeps falling (at least
 * one memory finished in the last `stallMs`), up to `timeoutMs * 3`; whatever is still pending or running
 * then is stuck. Before `timeoutMs` a pause is no verdict (a retry's backoff, a lapsed lease's takeover).
 */
export async function verify(base, key, acked, timeoutMs, { stallMs = 60_000 } = {}) {
  const started = Date.now();
  const softDeadline = started + timeoutMs;
  const hardDeadline = started + timeoutMs * 3;
  let memories;
  let unfinished;
  let best = Infinity;
  let lastProgress = Date.now();
  let lastLog = 0;
  for (;;) {
    memories = await listAll(base, key);
    unfinished = memories.filter((m) => m.processing_status === "pending" || m.processing_status === "running");
    if (unfinished.length < best) {
      best = unfinished.length;
      lastProgress = Date.now();
    }
    if (unfinished.length === 0) break;
    const now = Date.now();
    if (now > hardDeadline || (now > softDeadline && now - lastProgress > stallMs)) break;
    if (now > softDeadline && now - lastLog >= 30_000) {
      lastLog = now;
      console.log(`  still draining after ${((now - started) / 1000).toFixed(0)} s: ${unfinished.length} unfinished, last one finished ${((now - lastProgress) / 1000).toFixed(0)} s ago`);
    }
    await sleep(2000);
  }
  const waitedS = Math.round((Date.now() - started) / 1000);
  const byId = new Map(memories.map((m) => [m.id, m]));
  const perPath = new Map();
  for (const m of memories) if (m.source_path) perPath.set(m.source_path, (perPath.get(m.source_path) ?? 0) + 1);
  const ackedPaths = new Map();
  for (const a of acked) ackedPaths.set(a.path, a);
  const lost = [...ackedPaths.values()].filter((a) => !byId.has(a.id));
  const duplicated = [...ackedPaths.keys()].filter((p) => (perPath.get(p) ?? 0) > 1);
  const failed = memories.filter((m) => m.processing_status === "failed");
  return {
    memories: memories.length,
    acknowledged: ackedPaths.size,
    lost: lost.length,
    duplicated: duplicated.length,
    stuck: unfinished.length,
    failed: failed.length,
    failures: failed.slice(0, 5).map((m) => m.processing_error),
    waited_s: waitedS,
    stuck_statuses: unfinished.slice(0, 5).map((m) => ({ id: m.id, status: m.processing_status, created_at: m.created_at })),
    pass: lost.length === 0 && duplicated.length === 0 && unfinished.length === 0,
  };
}
