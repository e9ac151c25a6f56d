/**
 * npm run eval — recall quality per corpus, through the real HTTP handlers on fresh embedded
 * databases with real local embeddings. Each corpus is ranked four ways by the real recall code:
 * BM25 only, vectors only, hybrid (fused, with the floor, what users get), and hybrid without the
 * floor (to show what the floor costs). Exits non-zero when a corpus is under its floors.
 *
 *   fixture   eval/corpus.ts: 65 memories, 51 queries; the answerability threshold was fitted on it
 *   ops-chat  eval/ops-chat-corpus.ts: support chat transcripts, generated; fitted on nothing
 *   scifact   BEIR SciFact from ../shared/datasets/scifact: 5,183 abstracts, 300 queries;
 *             its odd query ids: the fusion weight, the calibration and the floor (even ids held out)
 *
 *   npm run eval                      all corpora
 *   npm run eval -- --corpus fixture  some corpora (comma-separated)
 *   npm run eval -- --verbose         every fixture query's results
 *   npm run eval -- --json FILE       the per-query report
 *   npm run eval -- --dump FILE       every scored candidate with its grade (for eval/fit-calibration.ts)
 *   npm run eval -- --write-docs      replace the table in docs/recall.md
 *   npm run eval -- --no-index-cache  re-index SciFact instead of using .cache/eval's snapshot
 *   npm run eval -- --scifact-docs N  development only: the first N abstracts and the queries they answer
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { getEmbedder } from "@/lib/ai/embedder.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { getDatabase, openDatabase, setDatabase, type Database } from "@/lib/db/database.ts";
import { maintainEmbeddedDatabase } from "@/lib/db/embedded-maintenance.ts";
import { claimMemory, processMemory } from "@/lib/processing/process-memory.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { lexicalBaseline, type LexicalRanker } from "@/lib/recall/lexical-baselines.ts";
import { lexicalIndexFor } from "@/lib/recall/lexical-index.ts";
import { setRecallMode, setRecallTrace, type RecallMode, type RecallTraceEntry } from "@/lib/recall/recall-memories.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { flushUsage } from "@/lib/usage/count-usage.ts";
import { setReranker } from "@/lib/recall/reranker.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { dispatch } from "../tests/support/router.ts";
import { HUB_MEMBERS, MEMORIES, QUERIES, USER_NAMES, type EvalQuery, type HubKey, type UserKey } from "./corpus.ts";
import { buildOpsChatCorpus } from "./ops-chat-corpus.ts";
import { embeddingCacheId } from "./embedding-cache.ts";
import { bulkIndex, loadScifact, scifactDir } from "./scifact.ts";

const args = process.argv.slice(2);
const option = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const verbose = args.includes("--verbose");
const jsonOut = option("--json");
const dumpOut = option("--dump");
const writeDocs = args.includes("--write-docs");
const ALL_CORPORA = ["fixture", "ops-chat", "scifact"] as const;
type CorpusName = (typeof ALL_CORPORA)[number];
const selected = (option("--corpus")?.split(",") ?? [...ALL_CORPORA]) as CorpusName[];

const MODES: { name: ModeName; mode: RecallMode }[] = [
  { name: "bm25", mode: { legs: "lexical", floor: false } },
  { name: "vectors", mode: { legs: "vector", floor: false } },
  { name: "hybrid", mode: { legs: "hybrid", floor: true } },
  { name: "hybrid_nofloor", mode: { legs: "hybrid", floor: false } },
];
type ModeName = "bm25" | "vectors" | "hybrid" | "hybrid_nofloor";

/**
 * CI floors per corpus (hybrid, with the floor): a little under what `npm run eval` measured
 * (docs/recall.md), so a regression fails CI. Near-miss traps: the fixture's 2 are the near
 * misses of two unanswerable questions (the Twilio note for "rotate the SendGrid API key", the
 * Redis pool note for "MySQL connection pool settings"), which are those questions' best matches
 * by every measure the ranking has; only a floor could drop them, and the one that did cost 10
 * points of SciFact's Recall@20. The ops-chat ones are structural: a product has 7 other
 * transcripts, so places 8–10 of a "<product>: <problem>" query go to the same problem on other
 * products (the listed traps) whatever the order.
 */
const FLOORS: Record<CorpusName, { ndcg10: number; recall20: number; mrr10: number; traps10: number; categories?: Record<string, number> }> = {
  fixture: { ndcg10: 0.94, recall20: 0.96, mrr10: 0.92, traps10: 2 },
  // cross-language: 0.789 since Chinese is glossed into English for the model and the lexical index
  // (lib/ai/gloss-han.ts); 0.389 before, with Chinese questions ordered by the lexical leg alone. The
  // six "new wording" questions were written after the glosses: 0.741 (0.437 before).
  "ops-chat": { ndcg10: 0.82, recall20: 0.97, mrr10: 0.79, traps10: 30, categories: { "cross-language": 0.74, "cross-language, new wording": 0.7 } },
  scifact: { ndcg10: 0.7, recall20: 0.87, mrr10: 0.67, traps10: 0 },
};

interface Client {
  id: string;
  key: string;
  personalHubId: string;
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
}

interface Query {
  id: string;
  category: string;
  text: string;
  relevant: Record<string, number>;
  /** Keys that must never be in the top 10 (near-miss traps). */
  traps: string[];
  body?: Record<string, unknown>;
}

interface Metrics {
  ndcg10: number;
  recall20: number;
  mrr10: number;
  /** Near-miss traps in the top 10, summed over queries. */
  traps10: number;
  /** Graded queries with no result at all. */
  empty: number;
}

interface CorpusResult {
  name: CorpusName;
  docs: number;
  queries: number;
  indexSeconds: number;
  querySeconds: number;
  modes: Record<ModeName, Metrics>;
  /** Per category, hybrid nDCG@10 (and each leg's), for categories worth showing. */
  categories: Record<string, Record<ModeName, number> & { n: number }>;
  extra: string[];
  failures: string[];
}

const dump: unknown[] = [];
const reports: unknown[] = [];

async function main() {
  setRateLimiter(new MemoryRateLimiter({ regular: 1e9, heavy: 1e9, light: 1e9 }));
  setReranker(null);
  const embedder = await getEmbedder();
  if (!embedder) throw new Error("no embedding model: run `npm run models`");
  const results: CorpusResult[] = [];
  for (const name of selected) {
    const started = Date.now();
    console.log(`::: ${name}`);
    if (name === "fixture") results.push(await runFixture());
    else if (name === "ops-chat") results.push(await runOpsChat());
    else if (name === "scifact") results.push(await runScifact());
    else throw new Error(`unknown corpus ${name}`);
    console.log(`  ${name} done in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  }

  const table = renderTable(results);
  console.log(`\n${table}\n`);
  for (const result of results) for (const line of result.extra) console.log(`${result.name}: ${line}`);
  if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ results, reports }, null, 2));
  if (dumpOut) writeFileSync(dumpOut, JSON.stringify(dump));
  if (writeDocs) {
    const docs = readFileSync("docs/recall.md", "utf8");
    const start = "<!-- eval-table:start -->";
    const end = "<!-- eval-table:end -->";
    if (!docs.includes(start) || !docs.includes(end)) throw new Error("docs/recall.md has no eval-table markers");
    writeFileSync("docs/recall.md", `${docs.slice(0, docs.indexOf(start) + start.length)}\n${table}\n${docs.slice(docs.indexOf(end))}`);
    console.log("docs/recall.md updated");
  }
  const failures = results.flatMap((r) => r.failures.map((f) => `${r.name}: ${f}`));
  if (failures.length) {
    console.error(`eval FAILED:\n  ${failures.join("\n  ")}`);
    process.exit(1);
  }
  console.log("eval passed");
  process.exit(0);
}

function renderTable(results: CorpusResult[]): string {
  const f = (n: number) => n.toFixed(3);
  const lines = [
    "| corpus | docs / queries | BM25 nDCG@10 | BM25 R@20 | BM25 MRR | vectors nDCG@10 | vectors R@20 | vectors MRR | **hybrid nDCG@10** | **hybrid R@20** | **hybrid MRR** | floor cost R@20 | traps in top 10 |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of results) {
    const m = r.modes;
    lines.push(
      `| ${r.name} | ${r.docs} / ${r.queries} | ${f(m.bm25.ndcg10)} | ${f(m.bm25.recall20)} | ${f(m.bm25.mrr10)} | ${f(m.vectors.ndcg10)} | ${f(m.vectors.recall20)} | ${f(m.vectors.mrr10)} | **${f(m.hybrid.ndcg10)}** | **${f(m.hybrid.recall20)}** | **${f(m.hybrid.mrr10)}** | ${f(m.hybrid_nofloor.recall20 - m.hybrid.recall20)} | ${m.hybrid.traps10} |`,
    );
  }
  const categoryRows = results.flatMap((r) =>
    Object.entries(r.categories).map(
      ([category, c]) => `| ${r.name} · ${category} | ${c.n} queries | ${f(c.bm25)} | | | ${f(c.vectors)} | | | **${f(c.hybrid)}** | | | | |`,
    ),
  );
  return [...lines, ...categoryRows].join("\n");
}

// ── running queries ────────────────────────────────────────────────────────────────────────────

function makeClient(key: string, id: string, personalHubId: string): Client {
  return {
    id,
    key,
    personalHubId,
    async call(method, path, body, headers = {}) {
      const res = await dispatch(
        new Request(`http://eval.test${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
          body: body === undefined ? undefined : JSON.stringify(body),
        }),
      );
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    },
  };
}

async function newUser(database: Database, email: string, name: string): Promise<Client> {
  const now = new Date();
  const { user, hub, extra } = await createUser(database.prisma, { email, name }, now, (tx, created) => insertApiKey(tx, created.user.id, "eval", now));
  return makeClient(extra.key, user.id, hub.id);
}

async function freshDatabase(): Promise<Database> {
  const database = await openDatabase({ dataDir: "memory://" });
  setDatabase(database);
  return database;
}

/** Runs every query in every mode; returns the memory keys each mode ranked, per query. */
async function runQueries(
  corpus: CorpusName,
  client: Client,
  queries: Query[],
  keyById: Map<string, string>,
): Promise<Record<ModeName, Map<string, { keys: string[]; metadata: any }>>> {
  const out = {} as Record<ModeName, Map<string, { keys: string[]; metadata: any }>>;
  // A large hub enters the lexical index in the background, its first searches answered in SQL:
  // every measured query sees the index (as on a running server), not a mix.
  if (queries[0]) await client.call("POST", "/v1/recall", { query: queries[0].text, no_rerank: true });
  await lexicalIndexFor((await getDatabase()).sql).settled();
  for (const { name, mode } of MODES) {
    setRecallMode(mode);
    out[name] = new Map();
    for (const query of queries) {
      if (dumpOut && name === "hybrid_nofloor") {
        setRecallTrace((_q, entries: RecallTraceEntry[]) => {
          for (const entry of entries) {
            const key = keyById.get(entry.memoryId) ?? "?";
            dump.push({ corpus, query: query.id, category: query.category, key, grade: query.relevant[key] ?? 0, trap: query.traps.includes(key), ...entry });
          }
        });
      }
      const res = await client.call("POST", "/v1/recall", { query: query.text, limit: 20, no_rerank: true, ...query.body });
      setRecallTrace(undefined);
      if (res.status !== 200) throw new Error(`${corpus} query ${query.id}: ${res.status} ${JSON.stringify(res.body)}`);
      const keys = (res.body.data.memories as { id: string }[]).map((m) => keyById.get(m.id) ?? `?${m.id}`);
      out[name].set(query.id, { keys, metadata: res.body.data.query_metadata });
    }
  }
  setRecallMode(undefined);
  // Batched writes go to this corpus's database before it is closed.
  await flushAccess();
  await flushUsage();
  return out;
}

function dcg(gains: number[]): number {
  return gains.reduce((sum, gain, i) => sum + (2 ** gain - 1) / Math.log2(i + 2), 0);
}

function scoreQuery(relevant: Record<string, number>, keys: string[]) {
  const entries = Object.entries(relevant);
  const grade = (key: string) => relevant[key] ?? 0;
  const ideal = entries.map(([, g]) => g).sort((a, b) => b - a);
  const first = keys.slice(0, 10).findIndex((key) => grade(key) > 0);
  const found = entries.filter(([key]) => keys.slice(0, 20).includes(key)).length;
  return {
    ndcg10: dcg(keys.slice(0, 10).map(grade)) / dcg(ideal.slice(0, 10)),
    recall20: found / entries.length,
    mrr10: first >= 0 ? 1 / (first + 1) : 0,
  };
}

function summarise(queries: Query[], ranked: Map<string, { keys: string[] }>): Metrics {
  const graded = queries.filter((q) => Object.keys(q.relevant).length > 0);
  const m: Metrics = { ndcg10: 0, recall20: 0, mrr10: 0, traps10: 0, empty: 0 };
  for (const query of queries) {
    const keys = ranked.get(query.id)!.keys;
    m.traps10 += keys.slice(0, 10).filter((key) => query.traps.includes(key)).length;
    if (!graded.includes(query)) continue;
    const s = scoreQuery(query.relevant, keys);
    m.ndcg10 += s.ndcg10 / graded.length;
    m.recall20 += s.recall20 / graded.length;
    m.mrr10 += s.mrr10 / graded.length;
    if (keys.length === 0) m.empty++;
  }
  return m;
}

function evaluate(name: CorpusName, docs: number, queries: Query[], ranked: Record<ModeName, Map<string, { keys: string[] }>>, times: { index: number; query: number }, categories: string[]): CorpusResult {
  const modes = Object.fromEntries(MODES.map(({ name: mode }) => [mode, summarise(queries, ranked[mode])])) as Record<ModeName, Metrics>;
  const byCategory: CorpusResult["categories"] = {};
  for (const category of categories) {
    const subset = queries.filter((q) => q.category === category && Object.keys(q.relevant).length > 0);
    if (subset.length === 0) continue;
    const row = { n: subset.length } as Record<ModeName, number> & { n: number };
    for (const { name: mode } of MODES) row[mode] = summarise(subset, ranked[mode]).ndcg10;
    byCategory[category] = row;
  }
  const floor = FLOORS[name];
  const h = modes.hybrid;
  const failures = [
    h.ndcg10 < floor.ndcg10 && `hybrid nDCG@10 ${h.ndcg10.toFixed(3)} < ${floor.ndcg10}`,
    h.recall20 < floor.recall20 && `hybrid Recall@20 ${h.recall20.toFixed(3)} < ${floor.recall20}`,
    h.mrr10 < floor.mrr10 && `hybrid MRR@10 ${h.mrr10.toFixed(3)} < ${floor.mrr10}`,
    h.traps10 > floor.traps10 && `${h.traps10} near-miss traps in the top 10`,
    ...Object.entries(floor.categories ?? {}).map(
      ([category, min]) => (byCategory[category]?.hybrid ?? 0) < min && `${category} hybrid nDCG@10 ${(byCategory[category]?.hybrid ?? 0).toFixed(3)} < ${min}`,
    ),
  ].filter((x): x is string => Boolean(x));
  // Targets (issue 10): the fused ranking is at least as good as its better leg on nDCG@10, its
  // Recall@20 at least BM25-only's, and the floor costs at most 1 point of Recall@20.
  const floorCost = modes.hybrid_nofloor.recall20 - h.recall20;
  const bestLeg = Math.max(modes.bm25.ndcg10, modes.vectors.ndcg10);
  if (floorCost > 0.01) failures.push(`the floor costs ${floorCost.toFixed(3)} of Recall@20 (target ≤ 0.01)`);
  if (h.recall20 < modes.bm25.recall20 - 0.005) failures.push(`hybrid Recall@20 ${h.recall20.toFixed(3)} < BM25-only ${modes.bm25.recall20.toFixed(3)}`);
  if (h.ndcg10 < bestLeg - 0.005) failures.push(`hybrid nDCG@10 ${h.ndcg10.toFixed(3)} < the better leg's ${bestLeg.toFixed(3)}`);
  const warnings: string[] = [];
  return { name, docs, queries: queries.length, indexSeconds: times.index, querySeconds: times.query, modes, categories: byCategory, extra: warnings, failures };
}

// ── corpora ───────────────────────────────────────────────────────────────────────────────────

/** Processes memories with the real background pipeline (classify, chunk, embed, summarise). */
async function processAll(database: Database, ids: Iterable<string>, keyById: Map<string, string>): Promise<void> {
  const config = processingConfig();
  for (const id of ids) {
    const claim = await claimMemory(database.prisma, id, { now: new Date(), staleBefore: new Date(0), maxAttempts: config.maxAttempts, retryBaseMs: config.retryBaseMs });
    if (!claim) throw new Error(`memory ${keyById.get(id)} could not be claimed for processing`);
    const outcome = await processMemory(database.prisma, claim, config);
    if (outcome.status !== "done") throw new Error(`processing ${keyById.get(id)}: ${JSON.stringify(outcome)}`);
  }
}

async function runFixture(): Promise<CorpusResult> {
  const database = await freshDatabase();
  const users = {} as Record<UserKey, Client>;
  for (const key of Object.keys(USER_NAMES) as UserKey[]) users[key] = await newUser(database, `${key}@eval.test`, USER_NAMES[key]);

  const hubIds = {} as Record<HubKey, string>;
  hubIds.ann = users.ann.personalHubId;
  for (const hub of Object.keys(HUB_MEMBERS) as HubKey[]) {
    if (hub === "ann") continue;
    const [owner, ...rest] = HUB_MEMBERS[hub];
    const created = await users[owner!].call("POST", "/v1/hubs", { name: `Eval ${hub}` });
    if (created.status !== 201) throw new Error(`hub create failed: ${JSON.stringify(created.body)}`);
    hubIds[hub] = created.body.data.hub?.id ?? created.body.data.id;
    for (const member of rest) {
      // Adding by id needs a person the adder can find: an invite to their address comes first.
      const invited = await users[owner!].call("POST", `/v1/hubs/${hubIds[hub]}/invites`, { role: "viewer", email: `${member}@eval.test` });
      if (invited.status !== 201) throw new Error(`invite failed: ${JSON.stringify(invited.body)}`);
      const added = await users[owner!].call("POST", `/v1/hubs/${hubIds[hub]}/members`, { user_id: users[member].id, role: "contributor" });
      if (added.status !== 201) throw new Error(`member add failed: ${JSON.stringify(added.body)}`);
    }
  }

  const started = Date.now();
  const idByKey = new Map<string, string>();
  const keyById = new Map<string, string>();
  for (const memory of MEMORIES) {
    // `daysAgo` whole days before now, less a little: at most an hour, and never more than half of
    // today so far, so the memory stays on that UTC calendar day ("yesterday" is a calendar day; in
    // the first hour after midnight a fixed hour moved it to the day before).
    const now = Date.now();
    const sinceMidnight = now % 86_400_000;
    const createdAt = new Date(now - memory.daysAgo * 86_400_000 - Math.max(1, Math.min(3_600_000, Math.floor(sinceMidnight / 2))));
    const res = await users[memory.author].call(
      "POST",
      "/v1/memories",
      {
        content: memory.content,
        ...(memory.title && { title: memory.title }),
        ...(memory.kind && { kind: memory.kind }),
        ...(memory.project_context && { project_context: memory.project_context }),
        source: "import",
        created_at: createdAt.toISOString(),
      },
      { "x-hub-id": hubIds[memory.hub] },
    );
    if (res.status !== 201) throw new Error(`memory ${memory.key}: ${res.status} ${JSON.stringify(res.body)}`);
    idByKey.set(memory.key, res.body.data.id);
    keyById.set(res.body.data.id, memory.key);
  }
  await processAll(database, idByKey.values(), keyById);
  for (const memory of MEMORIES.filter((m) => m.archived)) {
    const res = await users[memory.author].call("PATCH", `/v1/memories/${idByKey.get(memory.key)}`, { state: "archived" });
    if (res.status !== 200) throw new Error(`archive ${memory.key}: ${res.status}`);
  }
  const indexSeconds = (Date.now() - started) / 1000;

  const memoryByKey = new Map(MEMORIES.map((m) => [m.key, m]));
  const annReadable = new Set((Object.keys(HUB_MEMBERS) as HubKey[]).filter((hub) => HUB_MEMBERS[hub].includes("ann")));
  const queries: Query[] = QUERIES.map((q) => ({
    id: q.id,
    category: q.category,
    text: typeof q.query === "function" ? q.query(new Date()) : q.query,
    relevant: q.relevant,
    traps: q.harmful ?? [],
    body: { ...(q.hub_ids && { hub_ids: q.hub_ids.map((hub) => hubIds[hub]) }), ...(q.kind && { kind: q.kind }) },
  }));
  const queryStarted = Date.now();
  const ranked = await runQueries("fixture", users.ann, queries, keyById);
  const result = evaluate("fixture", MEMORIES.length, queries, ranked, { index: indexSeconds, query: (Date.now() - queryStarted) / 1000 }, ["paraphrase", "identifier", "multilingual", "keyword"]);

  // Fixture-only checks on what users get (hybrid): nothing harmful (another tenant's, archived,
  // out-of-filter, a trap, an answer to an unanswerable question) and the derived filters.
  let harmful = 0;
  let expectationFailures = 0;
  for (const q of QUERIES) {
    const { keys, metadata } = ranked.hybrid.get(q.id)!;
    const bad = keys.filter((key) => isHarmful(q, key, memoryByKey.get(key), annReadable));
    const expectations = checkExpectations(q, metadata, users);
    harmful += bad.length;
    expectationFailures += expectations.length;
    const s = Object.keys(q.relevant).length ? scoreQuery(q.relevant, keys) : null;
    reports.push({ corpus: "fixture", id: q.id, category: q.category, ...s, results: keys.slice(0, 10), harmful: bad, expectations });
    if (verbose || bad.length || expectations.length || (s && s.ndcg10 < 0.7)) {
      console.log(`  ${bad.length || expectations.length ? "✗" : "·"} ${q.id.padEnd(24)} ndcg10=${s?.ndcg10.toFixed(2) ?? " -  "} ${keys.slice(0, 5).join("  ")}${bad.length ? `  HARMFUL: ${bad.join(",")}` : ""}${expectations.length ? `  EXPECT: ${expectations.join("; ")}` : ""}`);
    }
  }
  const trapsReturned = QUERIES.flatMap((q) => ranked.hybrid.get(q.id)!.keys.flatMap((key, i) => (q.harmful?.includes(key) && memoryByKey.get(key) && annReadable.has(memoryByKey.get(key)!.hub) ? [`${q.id}→${key}@${i + 1}`] : [])));
  result.extra.push(`near-miss traps returned (top 20): ${trapsReturned.length ? trapsReturned.join(", ") : "none"}`);
  const negatives = QUERIES.filter((q) => q.category === "negative");
  const unanswered = negatives.filter((q) => ranked.hybrid.get(q.id)!.keys.length === 0).length;
  result.extra.push(`harmful results (hybrid) ${harmful}; unanswerable queries answered with nothing ${unanswered}/${negatives.length}; derived-filter expectation failures ${expectationFailures}`);
  if (harmful > 0) result.failures.push(`${harmful} harmful results`);
  if (expectationFailures > 0) result.failures.push(`${expectationFailures} derived-filter expectations failed`);

  // The lexical leg's ranking against PostgreSQL's own rankers, on the queries plain words can answer.
  const plain = QUERIES.filter((q) => ["paraphrase", "identifier", "keyword", "multilingual"].includes(q.category) && !q.hub_ids && !q.kind);
  const rankers: LexicalRanker[] = ["bm25", "ts_rank", "ts_rank_cd", "and_ts_rank_cd"];
  const comparison: string[] = [];
  for (const ranker of rankers) {
    let ndcg10 = 0;
    let empty = 0;
    for (const query of plain) {
      const text = typeof query.query === "function" ? query.query(new Date()) : query.query;
      const ids = await lexicalBaseline(database.sql, ranker, users.ann.id, [...annReadable].map((hub) => hubIds[hub]), text, 20);
      if (ids.length === 0) empty++;
      ndcg10 += scoreQuery(query.relevant, ids.map((id) => keyById.get(id) ?? "?")).ndcg10;
    }
    comparison.push(`${ranker} ${(ndcg10 / plain.length).toFixed(3)} (${empty} empty)`);
  }
  result.extra.push(`lexical rankers alone on ${plain.length} plain-word queries, nDCG@10: ${comparison.join(", ")}`);
  await database.close();
  return result;
}

async function runOpsChat(): Promise<CorpusResult> {
  const database = await freshDatabase();
  const client = await newUser(database, "ops@eval.test", "Ops Eval");
  const { docs, queries: opsQueries } = buildOpsChatCorpus();
  const started = Date.now();
  const keyById = new Map<string, string>();
  for (const doc of docs) {
    const res = await client.call("POST", "/v1/memories", { content: doc.content, source: "import" });
    if (res.status !== 201) throw new Error(`ops-chat ${doc.key}: ${res.status} ${JSON.stringify(res.body)}`);
    keyById.set(res.body.data.id, doc.key);
  }
  await processAll(database, keyById.keys(), keyById);
  const indexSeconds = (Date.now() - started) / 1000;
  const queries: Query[] = opsQueries.map((q) => ({ id: q.id, category: q.category, text: q.text, relevant: q.relevant, traps: q.harmful }));
  const queryStarted = Date.now();
  const ranked = await runQueries("ops-chat", client, queries, keyById);
  const result = evaluate("ops-chat", docs.length, queries, ranked, { index: indexSeconds, query: (Date.now() - queryStarted) / 1000 }, ["paraphrase", "named", "identifier", "cross-language", "cross-language, new wording"]);
  await database.close();
  return result;
}

async function runScifact(): Promise<CorpusResult> {
  const dir = scifactDir();
  if (!dir) throw new Error("SciFact not found: expected ../shared/datasets/scifact (or set ENGRAM_SCIFACT_DIR); run with --corpus fixture,ops-chat to skip it");
  const loaded = loadScifact(dir);
  const sample = option("--scifact-docs") ? Number(option("--scifact-docs")) : undefined;
  const docs = sample ? loaded.docs.slice(0, sample) : loaded.docs;
  const inSample = new Set(docs.map((d) => d.key));
  const scifactQueries = loaded.queries.filter((q) => Object.keys(q.relevant).every((key) => inSample.has(key)));
  const started = Date.now();
  const embedder = await getEmbedder();
  // Indexing 5,183 abstracts takes minutes on a loaded machine; the indexed database is kept as a
  // snapshot keyed by everything that shapes the index (migrations, chunker, chunk writer, model),
  // so a change to ranking code re-runs only the queries. `--no-index-cache` rebuilds.
  const snapshot = indexSnapshotPath("scifact", docs.map((d) => d.key).join(","), embeddingCacheId(embedder!));
  let database: Database;
  let client: Client;
  let keyById: Map<string, string>;
  if (!args.includes("--no-index-cache") && existsSync(`${snapshot}.tar`) && existsSync(`${snapshot}.json`)) {
    database = await openDatabase({ dataDir: "memory://", template: new Blob([readFileSync(`${snapshot}.tar`)]) });
    setDatabase(database);
    const saved = JSON.parse(readFileSync(`${snapshot}.json`, "utf8")) as { key: string; id: string; hubId: string; keyById: [string, string][] };
    client = makeClient(saved.key, saved.id, saved.hubId);
    keyById = new Map(saved.keyById);
    console.log(`  scifact: index snapshot ${path.basename(snapshot)}`);
  } else {
    database = await freshDatabase();
    client = await newUser(database, "scifact@eval.test", "SciFact Eval");
    keyById = await bulkIndex(database, embedder, { userId: client.id, hubId: client.personalHubId }, "scifact", docs);
    // The embedded database has no autovacuum: give the planner statistics after the bulk load.
    await maintainEmbeddedDatabase(database.sql);
    if (database.dump) {
      mkdirSync(path.dirname(snapshot), { recursive: true });
      writeFileSync(`${snapshot}.tar`, Buffer.from(await (await database.dump()).arrayBuffer()));
      writeFileSync(`${snapshot}.json`, JSON.stringify({ key: client.key, id: client.id, hubId: client.personalHubId, keyById: [...keyById] }));
    }
  }
  const indexSeconds = (Date.now() - started) / 1000;
  console.log(`  scifact: ${docs.length} abstracts indexed in ${indexSeconds.toFixed(0)} s`);
  const queries: Query[] = scifactQueries.map((q) => ({ id: q.id, category: Number(q.id) % 2 === 1 ? "odd ids (calibration)" : "even ids (held out)", text: q.text, relevant: q.relevant, traps: [] }));
  const queryStarted = Date.now();
  const ranked = await runQueries("scifact", client, queries, keyById);
  const result = evaluate("scifact", docs.length, queries, ranked, { index: indexSeconds, query: (Date.now() - queryStarted) / 1000 }, ["odd ids (calibration)", "even ids (held out)"]);
  await database.close();
  return result;
}

/** Where an indexed corpus's database snapshot is cached: named by a hash of what shapes the index. */
function indexSnapshotPath(name: string, docKeys: string, model: string): string {
  const hash = createHash("sha256").update(docKeys).update(model);
  const migrations = path.join(process.cwd(), "prisma", "migrations");
  for (const dir of readdirSync(migrations).sort()) {
    const file = path.join(migrations, dir, "migration.sql");
    if (existsSync(file)) hash.update(dir).update(readFileSync(file));
  }
  for (const file of ["lib/processing/chunk-content.ts", "lib/processing/processing-steps.ts", "lib/recall/store-chunks.ts", "lib/ai/gloss-han.ts", "eval/scifact.ts"]) {
    hash.update(readFileSync(path.join(process.cwd(), file)));
  }
  return path.join(process.cwd(), ".cache", "eval", `${name}-index-${hash.digest("hex").slice(0, 16)}`);
}

/**
 * Another tenant's, archived, or outside the requested hubs or kind: never acceptable. (Listed
 * near-miss traps are counted in the top 10 against FLOORS.traps10; an unrelated result for an
 * unanswerable question is reported separately: see docs/recall.md.)
 */
function isHarmful(query: EvalQuery, key: string, memory: (typeof MEMORIES)[number] | undefined, readable: Set<HubKey>): boolean {
  if (!memory) return true;
  if (!readable.has(memory.hub) || memory.archived) return true;
  if (query.hub_ids && !query.hub_ids.includes(memory.hub)) return true;
  if (query.kind && memory.kind !== query.kind) return true;
  return false;
}

function checkExpectations(query: EvalQuery, metadata: any, users: Record<UserKey, Client>): string[] {
  const problems: string[] = [];
  if (query.expect?.author && metadata.filters.author?.id !== users[query.expect.author].id) problems.push(`author filter ${JSON.stringify(metadata.filters.author)}`);
  if (query.expect?.timeBounded && !metadata.filters.created_after) problems.push("no time bound derived");
  return problems;
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
