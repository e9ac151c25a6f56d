/**
 * Offline fusion experiments over an eval dump (npm run eval -- --dump FILE): re-ranks every
 * query's candidates with alternative fusion rules and reports nDCG@10 / R@20 per corpus part,
 * without re-running recall.   npx tsx eval/fusion-sim.ts FILE
 */
import { readFileSync } from "node:fs";
import { QUERIES } from "./corpus.ts";
import { buildOpsChatCorpus } from "./ops-chat-corpus.ts";
import { loadScifact, scifactDir } from "./scifact.ts";

interface Row {
  corpus: string; query: string; category: string; key: string; grade: number; trap: boolean; memoryId: string;
  similarity: number | null; coverage: number; bm25: number; fused: number; missingEntities: number; entities: number;
  boost?: number; inVectorLeg?: boolean;
}
const file = process.argv[2]!;
const rows = JSON.parse(readFileSync(file, "utf8")) as Row[];

const relevant = new Map<string, Record<string, number>>();
const traps = new Map<string, string[]>();
for (const q of QUERIES) { relevant.set(`fixture|${q.id}`, q.relevant); traps.set(`fixture|${q.id}`, q.harmful ?? []); }
for (const q of buildOpsChatCorpus().queries) { relevant.set(`ops-chat|${q.id}`, q.relevant); traps.set(`ops-chat|${q.id}`, q.harmful); }
const dir = scifactDir();
if (dir) for (const q of loadScifact(dir).queries) relevant.set(`scifact|${q.id}`, q.relevant);

interface Mem { key: string; lex: number; vec: number; vecIndex: number; missing: number; entities: number; boost: number; cov: number }
const byQuery = new Map<string, { corpus: string; query: string; category: string; mems: Map<string, Mem> }>();
for (const r of rows) {
  const id = `${r.corpus}|${r.query}`;
  let q = byQuery.get(id);
  if (!q) byQuery.set(id, (q = { corpus: r.corpus, query: r.query, category: r.category, mems: new Map() }));
  let m = q.mems.get(r.memoryId);
  if (!m) q.mems.set(r.memoryId, (m = { key: r.key, lex: 0, vec: -1, vecIndex: -1, missing: r.missingEntities, entities: r.entities, boost: r.boost ?? 0, cov: 0 }));
  if (r.bm25 > 0) m.lex = Math.max(m.lex, r.bm25);
  if (r.similarity !== null) m.vec = Math.max(m.vec, r.similarity);
  if (r.similarity !== null && r.inVectorLeg) m.vecIndex = Math.max(m.vecIndex, r.similarity);
  m.cov = Math.max(m.cov, r.coverage);
}

function ranks(mems: Mem[], f: (m: Mem) => number | undefined): Map<Mem, number> {
  const list = mems.filter((m) => f(m) !== undefined).sort((a, b) => f(b)! - f(a)! || a.key.localeCompare(b.key));
  return new Map(list.map((m, i) => [m, i + 1]));
}
const dcg = (g: number[]) => g.reduce((s, x, i) => s + (2 ** x - 1) / Math.log2(i + 2), 0);
function metrics(rel: Record<string, number>, keys: string[]) {
  const ideal = Object.values(rel).sort((a, b) => b - a);
  const grade = (k: string) => rel[k] ?? 0;
  const found = Object.keys(rel).filter((k) => keys.slice(0, 20).includes(k)).length;
  return { ndcg: dcg(keys.slice(0, 10).map(grade)) / dcg(ideal.slice(0, 10)), r20: found / Object.keys(rel).length };
}

export type Ranker = (mems: Mem[]) => Mem[];
const lexOnly: Ranker = (mems) => mems.filter((m) => m.lex > 0).sort((a, b) => b.lex - a.lex);
const vecOnly: Ranker = (mems) => mems.filter((m) => m.vec > -1).sort((a, b) => b.vec - a.vec);
const demote = (m: Mem, d: number) => (m.missing <= 0 ? 1 : d ** (Math.min(m.missing, 2) * (0.5 + 0.5 * (m.entities ? m.missing / m.entities : 0))));
const rrf = (k: number, d: number, wl = 1): Ranker => (mems) => {
  const lr = ranks(mems, (m) => (m.lex > 0 ? m.lex : undefined));
  const vr = ranks(mems, (m) => (m.vec > -1 ? m.vec : undefined));
  const s = (m: Mem) => ((lr.has(m) ? wl / (k + lr.get(m)!) : 0) + (vr.has(m) ? 1 / (k + vr.get(m)!) : 0)) * (k + 1) / (1 + wl) * demote(m, d) + m.boost;
  return [...mems].sort((a, b) => s(b) - s(a));
};
/** Convex combination of min-max normalised scores (over this query's candidates); absent = 0. */
const convex = (alpha: number, d: number, norm: "minmax" | "z" = "minmax"): Ranker => (mems) => {
  const ls = mems.filter((m) => m.lex > 0).map((m) => m.lex);
  const vs = mems.filter((m) => m.vec > -1).map((m) => m.vec);
  const n = (xs: number[]) => {
    if (norm === "minmax") { const lo = Math.min(...xs), hi = Math.max(...xs); return (x: number) => (hi > lo ? (x - lo) / (hi - lo) : 1); }
    const mu = xs.reduce((a, b) => a + b, 0) / xs.length; const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mu) ** 2, 0) / xs.length) || 1;
    return (x: number) => (x - mu) / sd;
  };
  const nl = ls.length ? n(ls) : () => 0, nv = vs.length ? n(vs) : () => 0;
  const lmin = norm === "z" && ls.length ? Math.min(...ls.map(nl)) : 0, vmin = norm === "z" && vs.length ? Math.min(...vs.map(nv)) : 0;
  const s = (m: Mem) => (alpha * (m.lex > 0 ? nl(m.lex) : lmin) + (1 - alpha) * (m.vec > -1 ? nv(m.vec) : vmin)) * demote(m, d) + m.boost;
  return [...mems].sort((a, b) => s(b) - s(a));
};

const rankers: Record<string, Ranker> = { bm25: lexOnly, vec: vecOnly };
const grid = process.env.SIM_GRID === "fine";
for (const d of grid ? [0.35, 0.6, 0.8, 1] : [0.35, 1]) {
  rankers[`rrf60 d${d}`] = rrf(60, d);
  for (const a of grid ? [0.3, 0.35, 0.4, 0.45, 0.5] : [0.3, 0.4, 0.5, 0.6, 0.7]) rankers[`mm a${a} d${d}`] = convex(a, d);
  for (const a of grid ? [0.4, 0.5] : [0.5]) rankers[`z a${a} d${d}`] = convex(a, d, "z");
}
for (const extra of (process.env.SIM_EXTRA ?? "").split(",").filter(Boolean)) void extra;

const parts = (q: { corpus: string; query: string }) =>
  q.corpus === "scifact" ? ["scifact", `scifact-${Number(q.query) % 2 ? "odd" : "even"}`] : [q.corpus];
const table = new Map<string, Map<string, { ndcg: number; r20: number; n: number; traps: number }>>();
for (const [id, q] of byQuery) {
  const rel = relevant.get(id);
  if (!rel) continue;
  const graded = Object.keys(rel).length > 0;
  const mems = [...q.mems.values()];
  for (const [name, ranker] of Object.entries(rankers)) {
    const keys = ranker(mems).map((m) => m.key);
    const s = graded ? metrics(rel, keys) : { ndcg: 0, r20: 0 };
    const t = (traps.get(id) ?? []).filter((k) => keys.slice(0, 10).includes(k)).length;
    for (const p of parts(q)) {
      const row = table.get(p) ?? new Map();
      table.set(p, row);
      const cell = row.get(name) ?? { ndcg: 0, r20: 0, n: 0, traps: 0 };
      cell.ndcg += s.ndcg; cell.r20 += s.r20; cell.n += graded ? 1 : 0; cell.traps += t;
      row.set(name, cell);
    }
  }
}
for (const [p, row] of table) {
  console.log(`== ${p}`);
  for (const [name, c] of row) console.log(`  ${name.padEnd(16)} nDCG@10 ${(c.ndcg / c.n).toFixed(3)}  R@20 ${(c.r20 / c.n).toFixed(3)}  traps ${c.traps}  (n=${c.n})`);
}

// --emit FILE: the dump with each row's `fused` recomputed by the production fusion (for refitting
// the calibration with eval/fit-calibration.ts without re-running the eval).
const emit = process.argv.indexOf("--emit");
if (emit > 0) {
  const { fuseLegs, normaliseLeg } = await import("@/lib/recall/relevance-score.ts");
  const fusedBy = new Map<string, number>();
  for (const [id, q] of byQuery) {
    const lex = new Map<string, number>();
    const vec = new Map<string, number>();
    for (const [memoryId, m] of q.mems) {
      if (m.lex > 0) lex.set(memoryId, m.lex);
      if (m.vec > -1) vec.set(memoryId, m.vec);
    }
    const nl = normaliseLeg(lex);
    const nv = normaliseLeg(vec);
    for (const memoryId of q.mems.keys()) fusedBy.set(`${id}|${memoryId}`, fuseLegs(nl.get(memoryId), nv.get(memoryId), { lexical: true, vector: vec.size > 0 }));
  }
  const out = rows.map((r) => ({ ...r, fused: fusedBy.get(`${r.corpus}|${r.query}|${r.memoryId}`) ?? 0 }));
  (await import("node:fs")).writeFileSync(process.argv[emit + 1]!, JSON.stringify(out));
  console.log(`wrote ${out.length} rows to ${process.argv[emit + 1]}`);
}
