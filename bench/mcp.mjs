// npm run bench:mcp — what MCP adds to recall: `tools/call engram_recall` against
// `POST /v1/recall` with the same query, on the built server and a fresh embedded
// database. Never builds. Target (issue 12): MCP adds ≤ 5 ms at p50.
import { startServer, summarize } from "./lib/server.mjs";

const MEMORIES = Number(process.env.BENCH_MEMORIES ?? 300);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 300);
const WARMUP = 30;
const PORT = Number(process.env.BENCH_PORT ?? 3530);
const TOPICS = ["deploy", "billing", "search", "auth", "queue", "backup", "oncall", "metrics"];
const QUERIES = [
  "how do we restart the queue workers",
  "billing runbook for failed invoices",
  "who owns the search index rebuild",
  "auth token rotation steps",
  "backup restore drill",
  "what to check when metrics lag",
  "on-call escalation for deploys",
  "queue depth threshold",
];

function markdown(i) {
  const topic = TOPICS[i % TOPICS.length];
  return `# ${topic} note ${i}\n\nThe ${topic} runbook step ${i} says to check the dashboard, then restart worker ${i % 13} if the queue depth exceeds ${100 + (i % 50)}.\n\n- owner: team-${i % 7}\n- ticket: ENG-${10_000 + i}\n`;
}

const server = await startServer({ port: PORT });
const auth = { authorization: `Bearer ${server.apiKey}` };
try {
  for (let i = 0; i < MEMORIES; i++) {
    const res = await fetch(`${server.base}/v1/memories`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ content: markdown(i) }) });
    if (res.status !== 201) throw new Error(`push ${i}: ${res.status} ${await res.text()}`);
  }
  // Wait for background processing (chunks + embeddings) so both sides search the same index.
  for (const deadline = Date.now() + 300_000; ; ) {
    const res = await fetch(`${server.base}/v1/memories?limit=100`, { headers: auth });
    const { data } = await res.json();
    if (data.memories.every((m) => m.processing_status === "done") && data.total === MEMORIES) {
      let cursor = data.next_cursor;
      let pending = 0;
      while (cursor) {
        const page = (await (await fetch(`${server.base}/v1/memories?limit=100&cursor=${encodeURIComponent(cursor)}`, { headers: auth })).json()).data;
        pending += page.memories.filter((m) => m.processing_status !== "done").length;
        cursor = page.next_cursor;
      }
      if (pending === 0) break;
    }
    if (Date.now() > deadline) throw new Error("processing did not finish in 5 minutes");
    await new Promise((r) => setTimeout(r, 500));
  }
  console.log(`${MEMORIES} memories pushed and processed`);

  const rest = async (query) => {
    const res = await fetch(`${server.base}/v1/recall`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ query, limit: 10 }) });
    const body = await res.json();
    if (res.status !== 200) throw new Error(`recall ${res.status}`);
    return body.data.memories.map((m) => m.id);
  };
  let id = 0;
  const mcp = async (query) => {
    const res = await fetch(`${server.base}/mcp`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25" },
      body: JSON.stringify({ jsonrpc: "2.0", id: ++id, method: "tools/call", params: { name: "engram_recall", arguments: { query, limit: 10 } } }),
    });
    const body = await res.json();
    if (res.status !== 200 || body.result?.isError) throw new Error(`mcp ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
    return body.result.structuredContent.memories.map((m) => m.id);
  };

  // Same query, both paths, alternating order, one request at a time: the difference is MCP's cost.
  const times = { rest: [], mcp: [] };
  const paired = [];
  for (let round = 0; round < WARMUP + ROUNDS; round++) {
    const query = QUERIES[round % QUERIES.length];
    const order = round % 2 === 0 ? ["rest", "mcp"] : ["mcp", "rest"];
    const ids = {};
    for (const side of order) {
      const started = performance.now();
      ids[side] = await (side === "rest" ? rest(query) : mcp(query));
      if (round >= WARMUP) times[side].push(performance.now() - started);
    }
    if (round >= WARMUP) paired.push(times.mcp.at(-1) - times.rest.at(-1));
    if (JSON.stringify(ids.rest) !== JSON.stringify(ids.mcp)) throw new Error(`different results for "${query}"`);
  }
  const r = summarize(times.rest);
  const m = summarize(times.mcp);
  const fmt = (s) => `p50=${s.p50.toFixed(2)} ms  p95=${s.p95.toFixed(2)} ms  p99=${s.p99.toFixed(2)} ms  (${(1000 / (s.p50 || 1)).toFixed(0)} req/s at p50, 1 client)`;
  console.log(`POST /v1/recall             n=${r.count}  ${fmt(r)}`);
  console.log(`tools/call engram_recall    n=${m.count}  ${fmt(m)}`);
  // The median of per-round differences (same query, back to back) cancels most of the drift a busy machine adds.
  const pairedSorted = [...paired].sort((a, b) => a - b);
  const pairedP50 = pairedSorted[Math.floor(pairedSorted.length / 2)];
  console.log(`MCP adds ${(m.p50 - r.p50).toFixed(2)} ms at p50 (${(m.p95 - r.p95).toFixed(2)} ms at p95); median paired difference ${pairedP50.toFixed(2)} ms`);
  console.log(`target ≤ 5 ms at p50 (paired): ${pairedP50 <= 5 ? "met" : "MISSED"}`);
} finally {
  await server.stop();
}
