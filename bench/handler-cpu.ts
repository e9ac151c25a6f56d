// npm run bench:handler-cpu — the server's CPU per request in our code, for the four routes of
// bench:load's mix, with the route handlers called directly in process (no HTTP, no Next): the part
// of a request's cost that our code and how it calls Prisma decide. Never part of npm test.
//
// A fresh database: DATABASE_URL (a PostgreSQL server: a new database on it, dropped afterwards) or,
// without it, an embedded one. No background processing (pushes stay pending, recall finds them
// lexically); the rate limiter is the one the server uses on that database. Routes run interleaved
// in rounds, so the machine's other load falls on each alike; CPU time (process.cpuUsage), not wall
// time, is what is reported, as the median of the rounds.
//   BENCH_REQUESTS   requests per route and round (default 100, after a warm-up round)
//   BENCH_ROUNDS     rounds (default 5)
//   BENCH_ROUTES     which routes: recall,push,list,get (default all)
// A profile: `node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/handler-cpu.ts`.
import { flushAccess } from "@/lib/recall/record-access.ts";
import { flushUsage } from "@/lib/usage/count-usage.ts";
import * as memory from "@/app/v1/memories/[id]/route.ts";
import * as memories from "@/app/v1/memories/route.ts";
import * as recall from "@/app/v1/recall/route.ts";
// @ts-expect-error plain ESM helper without types
import { noteText } from "./lib/campaign.mjs";
import { okJson, routeBench } from "./lib/route-bench.ts";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ROUTES = (process.env.BENCH_ROUTES ?? "recall,push,list,get").split(",").map((s) => s.trim());
const TOPICS = ["deploy", "billing", "search", "auth", "queue", "cache", "backup", "alerts"];

type Handler = (req: Request, context: { params: Promise<Record<string, string>> }) => Promise<Response>;

const bench = await routeBench("handlercpu");
const { label } = bench;
try {
  const call = async (handler: Handler, method: string, path: string, body?: unknown, params: Record<string, string> = {}) =>
    okJson(await handler(bench.request(method, path, body), { params: Promise.resolve(params) }), `${method} ${path}`);
  const ids: string[] = [];
  for (let i = 0; i < 60; i++) ids.push((await call(memories.POST, "POST", "/v1/memories", { content: noteText(`seed${i}`), source_path: `seed/${i}.md` })).data.id);
  let n = 0;
  const routes: Record<string, () => Promise<unknown>> = {
    recall: () => call(recall.POST, "POST", "/v1/recall", { query: `how do I restart the ${TOPICS[n % TOPICS.length]} worker`, limit: 10 }),
    push: () => call(memories.POST, "POST", "/v1/memories", { content: noteText(`cpu${n}`), source_path: `cpu/${n}.md` }),
    list: () => call(memories.GET, "GET", "/v1/memories?limit=20"),
    get: () => {
      const id = ids[n % ids.length]!;
      return call(memory.GET, "GET", `/v1/memories/${id}`, undefined, { id });
    },
  };
  for (const name of ROUTES) if (!routes[name]) throw new Error(`unknown route ${name}`);
  const samples = new Map<string, number[]>(ROUTES.map((name) => [name, []]));
  console.log(`handler-cpu: ${label}, ${ROUNDS} rounds of ${REQUESTS} requests per route, one at a time`);
  for (let round = -1; round < ROUNDS; round++) {
    for (const name of ROUTES) {
      // What the previous requests batched (access and usage counts) is written outside the measure.
      await flushAccess();
      await flushUsage();
      const cpu = process.cpuUsage();
      for (let i = 0; i < REQUESTS; i++, n++) await routes[name]!();
      const used = process.cpuUsage(cpu);
      if (round >= 0) samples.get(name)!.push((used.user + used.system) / 1000 / REQUESTS);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  for (const [name, values] of samples) {
    console.log(`  ${name.padEnd(7)} ${median(values).toFixed(3)} ms CPU per request (rounds: ${values.map((v) => v.toFixed(2)).join(" ")})`);
  }
} finally {
  await bench.close();
}
process.exit(0);
