// npx tsx bench/route-cost.ts — what each route of bench:load's mix costs the server, in process:
// CPU per request and statements per request, one client, requests one after another (no
// contention, so the numbers compare builds even on a shared machine). Never part of npm test.
//
// Drives the real route handlers on a fresh database: DATABASE_URL (a PostgreSQL server: a new
// database on it, dropped afterwards; statements are counted there) or, without it, an embedded one.
// The rate limiter is the one the server uses on that database. No background processing: pushes
// stay pending, recall finds them lexically.
//   BENCH_REQUESTS   measured requests per route (default 300, after 30 to warm up)
//   BENCH_ROUTES     which routes, comma-separated: hubs,list,get,recall,push (default all)
//   BENCH_STATEMENTS=1  also print each route's statements, by text
import pg from "pg";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { flushUsage } from "@/lib/usage/count-usage.ts";
// @ts-expect-error plain ESM helper without types
import { noteText } from "./lib/campaign.mjs";
import { okJson, routeBench } from "./lib/route-bench.ts";
import { dispatch } from "../tests/support/router.ts";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 300);
const ROUTES = (process.env.BENCH_ROUTES ?? "hubs,list,get,recall,push").split(",").map((s) => s.trim());
const SHOW = process.env.BENCH_STATEMENTS === "1";
const TOPICS = ["deploy", "billing", "search", "auth", "queue", "cache", "backup", "alerts"];

// Statements as the driver sends them (PostgreSQL only: the embedded database has no driver here).
const sent: string[] = [];
const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const q = args[0] as string | { text?: string };
  sent.push((typeof q === "string" ? q : (q?.text ?? "?")).replace(/\s+/g, " ").trim().slice(0, 120));
  return query.apply(this, args);
} as typeof pg.Client.prototype.query;

const bench = await routeBench("routecost");
const { database, label } = bench;
try {
  const call = async (method: string, path: string, body?: unknown) => okJson(await dispatch(bench.request(method, path, body)), `${method} ${path}`);
  const ids: string[] = [];
  for (let i = 0; i < 40; i++) ids.push((await call("POST", "/v1/memories", { content: noteText(`seed${i}`), source_path: `seed/${i}.md` })).data.id);
  let n = 0;
  const routes: Record<string, () => Promise<unknown>> = {
    hubs: () => call("GET", "/v1/hubs"),
    list: () => call("GET", "/v1/memories?limit=20"),
    get: () => call("GET", `/v1/memories/${ids[n % ids.length]}`),
    recall: () => call("POST", "/v1/recall", { query: `how do I restart the ${TOPICS[n % TOPICS.length]} worker`, limit: 10 }),
    push: () => call("POST", "/v1/memories", { content: noteText(`cost${n}`), source_path: `cost/${n}.md` }),
  };
  console.log(`route-cost: ${label}, ${REQUESTS} requests per route, one at a time`);
  for (const name of ROUTES) {
    const run = routes[name];
    if (!run) throw new Error(`unknown route ${name}`);
    for (let i = 0; i < 30; i++, n++) await run();
    // The access and usage counts batched by the warm-up are written before the measure starts.
    await flushAccess();
    await flushUsage();
    sent.length = 0;
    const cpu = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < REQUESTS; i++, n++) await run();
    const used = process.cpuUsage(cpu);
    const wall = performance.now() - started;
    const statements = database.kind === "postgres" ? (sent.length / REQUESTS).toFixed(2) : "–";
    console.log(`  ${name.padEnd(7)} CPU ${((used.user + used.system) / 1000 / REQUESTS).toFixed(2)} ms/request, wall ${(wall / REQUESTS).toFixed(2)} ms, statements ${statements}/request`);
    if (SHOW) {
      const byText = new Map<string, number>();
      for (const text of sent) byText.set(text, (byText.get(text) ?? 0) + 1);
      for (const [text, count] of [...byText].sort((a, b) => b[1] - a[1])) console.log(`      ${(count / REQUESTS).toFixed(2)}  ${text}`);
    }
  }
} finally {
  await bench.close();
}
process.exit(0);
