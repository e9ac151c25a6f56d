// npm run bench:api — create / get / list latency and throughput against the
// built server on a fresh embedded database with 10k memories. Never builds.
import autocannon from "autocannon";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { root, startServer, summarize } from "./lib/server.mjs";

const TOTAL = Number(process.env.BENCH_MEMORIES ?? 10_000);
/** Latency is measured with one client (the embedded database runs one statement at a time, so with N
 * clients every latency is ~N service times); throughput with several. */
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);
const READ_SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const LATENCY_CREATES = 1_000;

function markdown(i) {
  return `# Note ${i}: service ${i % 97}\n\nThe ${["deploy", "billing", "search", "auth"][i % 4]} runbook step ${i} says to check the dashboard, ` +
    `then restart worker ${i % 13} if the queue depth exceeds ${100 + (i % 50)}.\n\n- owner: team-${i % 7}\n- ticket: ENG-${10_000 + i}\n`;
}

/** Runs autocannon, recording every response's latency (autocannon itself has no p95). */
async function run(name, options, connections = CONNECTIONS) {
  const latencies = [];
  const statuses = new Map();
  const result = await autocannon({
    connections,
    ...options,
    setupClient(client) {
      client.on("response", (status, _bytes, responseTime) => {
        latencies.push(responseTime);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      });
    },
  });
  const stats = summarize(latencies);
  const rps = latencies.length / (result.duration || 1);
  const row = { name, connections, ...stats, rps: Math.round(rps), statuses: Object.fromEntries(statuses), errors: result.errors, timeouts: result.timeouts };
  console.log(
    `${name.padEnd(8)} c=${String(connections).padStart(2)} n=${String(stats.count).padStart(6)}  p50=${stats.p50.toFixed(2)} ms  p95=${stats.p95.toFixed(2)} ms  p99=${stats.p99.toFixed(2)} ms  ${row.rps} req/s  statuses=${JSON.stringify(row.statuses)}`,
  );
  return row;
}

const server = await startServer({ env: process.env.BENCH_PROCESSING === "off" ? { ENGRAM_PROCESSING: "off" } : {} });
console.log(`cold start to healthy: ${server.coldStartMs.toFixed(0)} ms (built server, fresh embedded database)`);
const headers = { authorization: `Bearer ${server.apiKey}`, "content-type": "application/json" };
try {
  let n = 0;
  const createRequests = [{ method: "POST", headers, setupRequest: (req) => ({ ...req, body: JSON.stringify({ content: markdown(n++), tags: ["bench"] }) }) }];
  const createBulk = await run("create", { url: `${server.base}/v1/memories`, amount: TOTAL - LATENCY_CREATES, requests: createRequests });
  const create = await run("create", { url: `${server.base}/v1/memories`, amount: LATENCY_CREATES, requests: createRequests }, 1);
  const ids = [];
  let cursor = "";
  do {
    const res = await fetch(`${server.base}/v1/memories?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { headers });
    const { data } = await res.json();
    ids.push(...data.memories.map((m) => m.id));
    cursor = data.next_cursor;
  } while (cursor);
  console.log(`loaded ${ids.length} memories`);
  const getOptions = {
    url: server.base,
    duration: READ_SECONDS,
    requests: [{ method: "GET", headers, setupRequest: (req) => ({ ...req, path: `/v1/memories/${ids[Math.floor(Math.random() * ids.length)]}` }) }],
  };
  const listOptions = { url: `${server.base}/v1/memories?limit=20`, duration: READ_SECONDS, headers };
  const get = await run("get", getOptions, 1);
  const getBulk = await run("get", getOptions);
  const list = await run("list", listOptions, 1);
  const listBulk = await run("list", listOptions);
  const results = {
    memories: ids.length,
    processing: process.env.BENCH_PROCESSING === "off" ? "off" : "on",
    cold_start_ms: Math.round(server.coldStartMs),
    latency: { create, get, list },
    throughput: { create: createBulk, get: getBulk, list: listBulk },
    at: new Date().toISOString(),
  };
  const dir = path.join(root, "bench", "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, "api.json"), JSON.stringify(results, null, 2));
} finally {
  await server.stop();
}
