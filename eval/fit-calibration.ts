/**
 * Fits the calibrated relevance score (lib/recall/relevance-score.ts SCORE_MODEL.hybrid) on one
 * part of an eval dump and reports it on every other part: log-loss, expected calibration error,
 * and what each candidate floor would cost (Recall@20 lost, unanswerable fixture queries still
 * answered, near-miss traps kept).
 *
 *   npm run eval -- --dump /tmp/dump.json
 *   npx tsx eval/fit-calibration.ts /tmp/dump.json [fit-set]     fit-set: scifact-odd (default)
 */
import { readFileSync } from "node:fs";

interface Row {
  corpus: string;
  query: string;
  category: string;
  key: string;
  grade: number;
  trap: boolean;
  memoryId: string;
  similarity: number | null;
  coverage: number;
  bm25: number;
  fused: number;
  missingEntities: number;
  entities: number;
}

const [file, fitSet = "scifact-odd"] = process.argv.slice(2);
if (!file) throw new Error("usage: fit-calibration.ts DUMP [fit-set]");
const rows = (JSON.parse(readFileSync(file, "utf8")) as Row[]).filter((r) => r.similarity !== null);

const ALL_FEATURES = ["bias", "similarity", "coverage", "bm25", "fused", "missingEntity"];
// FIT_WITHOUT=fused,bm25 fits a model without those features (their weight stays 0).
const without = new Set((process.env.FIT_WITHOUT ?? "").split(",").filter(Boolean));
const NAMES = ALL_FEATURES.filter((name) => !without.has(name));
const features = (r: Row) => {
  const share = r.entities > 0 ? r.missingEntities / r.entities : 0;
  const all = [1, Math.max(r.similarity ?? 0, 0), Math.min(r.coverage, 1), Math.min(r.bm25, 1.5), Math.min(r.fused, 1), -Math.min(r.missingEntities, 2) * (0.5 + 0.5 * share)];
  return all.filter((_, i) => !without.has(ALL_FEATURES[i]!));
};

const part = (r: Row) => (r.corpus === "scifact" ? `scifact-${Number(r.query) % 2 === 1 ? "odd" : "even"}` : r.corpus);
// One row per memory and query (its best chunk by the current model's order: highest fused, then similarity).
const best = new Map<string, Row>();
for (const r of rows) {
  const id = `${r.corpus}|${r.query}|${r.memoryId}`;
  const previous = best.get(id);
  if (!previous || (r.similarity ?? 0) + r.coverage > (previous.similarity ?? 0) + previous.coverage) best.set(id, r);
}
const data = [...best.values()];
// Each candidate's place in its query's fused order: a floor costs Recall@20 only for relevant
// memories in the top 20.
const placeOf = new Map<Row, number>();
const byQuery = new Map<string, Row[]>();
for (const r of data) byQuery.set(`${r.corpus}|${r.query}`, [...(byQuery.get(`${r.corpus}|${r.query}`) ?? []), r]);
for (const list of byQuery.values()) list.sort((a, b) => b.fused - a.fused).forEach((r, i) => placeOf.set(r, i + 1));
const fitRows = data.filter((r) => part(r) === fitSet);
if (fitRows.length === 0) throw new Error(`no rows in ${fitSet}`);

// Newton's method with a little L2 (not on the bias).
let w = NAMES.map(() => 0);
const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));
for (let iter = 0; iter < 30; iter++) {
  const n = NAMES.length;
  const grad = Array<number>(n).fill(0);
  const hess = Array.from({ length: n }, () => Array<number>(n).fill(0));
  for (const r of fitRows) {
    const x = features(r);
    const p = sigmoid(x.reduce((s, v, i) => s + v * w[i]!, 0));
    const y = r.grade > 0 ? 1 : 0;
    for (let i = 0; i < n; i++) {
      grad[i] = grad[i]! + (p - y) * x[i]!;
      const row = hess[i]!;
      for (let j = 0; j < n; j++) row[j] = row[j]! + p * (1 - p) * x[i]! * x[j]!;
    }
  }
  for (let i = 1; i < n; i++) {
    grad[i] = grad[i]! + 0.5 * w[i]!;
    hess[i]![i] = hess[i]![i]! + 0.5;
  }
  const step = solve(hess, grad);
  const norm = Math.hypot(...step);
  if (!Number.isFinite(norm)) break;
  const scale = norm > 2 ? 2 / norm : 1;
  w = w.map((v, i) => v - scale * step[i]!);
}
console.log(`fitted on ${fitSet} (${fitRows.length} memory candidates, ${fitRows.filter((r) => r.grade > 0).length} relevant):`);
console.log(`  { ${NAMES.map((name, i) => `${name}: ${w[i]!.toFixed(2)}`).join(", ")} }`);

const score = (r: Row) => sigmoid(features(r).reduce((s, v, i) => s + v * w[i]!, 0));
const parts = [...new Set(data.map(part))].sort();
for (const p of parts) {
  const subset = data.filter((r) => part(r) === p);
  let loss = 0;
  const bins = Array.from({ length: 10 }, () => ({ n: 0, p: 0, y: 0 }));
  for (const r of subset) {
    const s = Math.min(Math.max(score(r), 1e-6), 1 - 1e-6);
    const y = r.grade > 0 ? 1 : 0;
    loss -= y * Math.log(s) + (1 - y) * Math.log(1 - s);
    const bin = bins[Math.min(9, Math.floor(s * 10))]!;
    bin.n = bin.n + 1;
    bin.p = bin.p + s;
    bin.y = bin.y + y;
  }
  const ece = bins.reduce((sum, b) => sum + (b.n ? Math.abs(b.p - b.y) : 0), 0) / subset.length;
  console.log(`${p.padEnd(14)} log-loss ${(loss / subset.length).toFixed(3)}  ECE ${ece.toFixed(3)}  reliability ${bins.map((b) => (b.n ? `${(b.p / b.n).toFixed(2)}→${(b.y / b.n).toFixed(2)}(${b.n})` : "")).filter(Boolean).join(" ")}`);
}

// Floors: relevant memories of the fused top 20 lost, unanswerable queries answered, traps kept.
console.log("floor  " + parts.map((p) => p.padEnd(34)).join(""));
for (const floor of [0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2]) {
  const cells = parts.map((p) => {
    const subset = data.filter((r) => part(r) === p);
    const relevant = subset.filter((r) => r.grade > 0 && placeOf.get(r)! <= 20);
    const lost = relevant.filter((r) => score(r) < floor).length;
    const negatives = new Set(subset.filter((r) => r.category === "negative").map((r) => r.query));
    const answered = new Set(subset.filter((r) => r.category === "negative" && score(r) >= floor).map((r) => r.query));
    const traps = subset.filter((r) => r.trap && score(r) >= floor).length;
    return `lost ${lost}/${relevant.length} neg ${answered.size}/${negatives.size} traps ${traps}`.padEnd(34);
  });
  console.log(`${floor.toFixed(3)}  ${cells.join("")}`);
}

function solve(a: number[][], b: number[]): number[] {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]!]);
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(m[r]![col]!) > Math.abs(m[pivot]![col]!)) pivot = r;
    [m[col], m[pivot]] = [m[pivot]!, m[col]!];
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const row = m[r]!;
      const top = m[col]!;
      const f = row[col]! / top[col]!;
      for (let c = col; c <= n; c++) row[c] = row[c]! - f * top[c]!;
    }
  }
  return m.map((row, i) => row[n]! / row[i]!);
}
