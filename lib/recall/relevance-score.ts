/**
 * Fusion and calibration. Two separate jobs:
 *
 * 1. ORDER — a convex combination of the two legs' scores (BM25 and cosine), each min-max
 *    normalised over the query's candidate memories (Bruch, Gai & Ingber, "An Analysis of Fusion
 *    Functions for Hybrid Retrieval", 2023). Normalising per query puts both legs on the same
 *    0..1 scale whatever the corpus, the query length or the model; unlike reciprocal-rank fusion
 *    it keeps how far apart the candidates are, so a leg that is sure (one chunk far ahead) counts
 *    for more than a leg whose top 20 are all alike. One constant, LEXICAL_WEIGHT.
 * 2. SCORE — a calibrated 0..1 probability of relevance from evidence whose
 *    scale does not depend on the query (cosine, idf coverage, BM25 / idf mass,
 *    the fused value, missing entities). It decides the floor (an unrelated
 *    question returns nothing) and what `relevance_score` says; the order of
 *    the entries is the fused order, and the scores shown are made to fall
 *    monotonically along it (isotonic regression).
 */
export interface RelevanceEvidence {
  similarity: number | null;
  coverage: number;
  bm25: number;
  /** The memory's fused value: 1 = the best candidate of every leg (see fuseLegs). */
  fused: number;
  missingEntities: number;
  entities: number;
}

/**
 * The lexical leg's weight in the fusion (the vector leg has 1 − this). Fitted on SciFact's odd
 * query ids (grid 0.3–0.7 in steps of 0.05, eval/fusion-sim.ts over an eval dump): nDCG@10 0.729
 * there. Reported on the others (hybrid without floor, nDCG@10 / R@20): SciFact even ids
 * 0.718 / 0.874, fixture 0.954 / 0.977, ops-chat 0.782 / 0.956 (docs/recall.md has the table).
 * Reciprocal-rank fusion (k = 60) scored 0.663 / 0.848 on SciFact, under BM25 alone (0.667).
 */
export const LEXICAL_WEIGHT = 0.4;

/**
 * Min-max normalisation of one leg's scores over the query's candidates: the best is 1, the
 * worst 0 (so is a memory the leg did not return). A leg with one candidate, or all alike, gives 1.
 */
export function normaliseLeg(scores: Map<string, number>): Map<string, number> {
  let lo = Infinity;
  let hi = -Infinity;
  for (const value of scores.values()) {
    lo = Math.min(lo, value);
    hi = Math.max(hi, value);
  }
  return new Map([...scores].map(([id, value]) => [id, hi > lo ? (value - lo) / (hi - lo) : 1]));
}

/**
 * The fused value of a memory from its normalised leg scores (undefined: not returned by that
 * leg, counted as 0), over the legs that ran: 1 = the best candidate of every leg.
 */
export function fuseLegs(lexical: number | undefined, vector: number | undefined, legs: { lexical: boolean; vector: boolean }): number {
  const weight = (legs.lexical ? LEXICAL_WEIGHT : 0) + (legs.vector ? 1 - LEXICAL_WEIGHT : 0);
  if (weight === 0) return 0;
  const sum = (legs.lexical ? LEXICAL_WEIGHT * (lexical ?? 0) : 0) + (legs.vector ? (1 - LEXICAL_WEIGHT) * (vector ?? 0) : 0);
  return sum / weight;
}

/**
 * The calibration: a logistic model over the evidence above, giving `relevance_score`.
 * `hybrid` is FITTED on SciFact's odd query ids (eval/fit-calibration.ts over an eval dump,
 * 12,197 candidates, 175 relevant); reported on the rest (log-loss / expected calibration error):
 * SciFact even ids 0.031 / 0.004, fixture 0.047 / 0.012, ops-chat 0.154 / 0.027. Its
 * missing-entity weight came out −0.13 (no evidence either way) and is 0 here. `lexical` (no
 * embedding: no model, or a memory not embedded yet) is still set by hand.
 */
export const SCORE_MODEL = {
  hybrid: { bias: -10.55, similarity: 2.84, coverage: 1.31, bm25: 0.09, fused: 8.18, missingEntity: 0 },
  lexical: { bias: -4.0, similarity: 0, coverage: 4.0, bm25: 0.5, fused: 2.0, missingEntity: 2.0 },
};

/**
 * Whether a question is answerable at all: the same kind of logistic model but only over
 * evidence that does not depend on the other candidates (cosine, coverage, BM25 / idf mass), so
 * the best candidate of an unrelated question does not look good just for being the best.
 * FITTED on SciFact's odd query ids (FIT_WITHOUT=fused,missingEntity eval/fit-calibration.ts).
 */
export const ANSWERABLE_MODEL = { bias: -8.99, similarity: 7.5, coverage: 2.3, bm25: 2.01 };
/**
 * A question none of whose candidates reaches this (log-odds of the model above) gets no
 * results. FITTED on the fixture's unanswerable questions: the round value just above its
 * nonsense question (best candidate −7.12; "best lasagna recipe" −7.89), which the eval shows
 * costs no Recall@20 on any corpus. Relevant candidates with weaker evidence exist (MiniLM gives
 * an ops-chat paraphrase's answers cosine 0.2, the nonsense question's best 0.25), so it cannot
 * be higher without costing recall: near misses of unanswerable questions that share words or
 * topic (the SendGrid question's Twilio note) are not removed by it.
 */
export const ANSWERABLE_LOGIT = -7.0;

/**
 * Of an answerable question, candidates whose answerability log-odds are more than this under the
 * best candidate's (e^5 ≈ 150 times less likely) are dropped. FITTED on SciFact's odd query ids:
 * the smallest whole gap that costs under half a point of their Recall@20 (0.3; a gap of 4 cost
 * 1.2). Reported: SciFact even ids, fixture and ops-chat lose nothing (over an eval dump); it
 * drops about half of the fixture's top-20 entries (all irrelevant) and 10–15 % on the others.
 */
export const ANSWERABLE_GAP = 5;

/** The answerability log-odds of one candidate (null: no embedding, use the lexical floor). */
export function answerableLogit(evidence: Pick<RelevanceEvidence, "similarity" | "coverage" | "bm25">): number | null {
  if (evidence.similarity === null) return null;
  const m = ANSWERABLE_MODEL;
  return m.bias + m.similarity * Math.max(evidence.similarity, 0) + m.coverage * Math.min(evidence.coverage, 1) + m.bm25 * Math.min(evidence.bm25, 1.5);
}

/**
 * Candidates without an embedding (a memory not embedded yet, or no model) whose lexical-model
 * score is under this are dropped. Set by hand.
 */
export const RELEVANCE_FLOOR = 0.05;
/** The floor when the query's own time or author phrase already selects what is wanted. */
export const DERIVED_FILTER_FLOOR = 0;

export const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

/** The model's log-odds of relevance. */
export function relevanceLogit(evidence: RelevanceEvidence): number {
  const model = evidence.similarity === null ? SCORE_MODEL.lexical : SCORE_MODEL.hybrid;
  const missingShare = evidence.entities > 0 ? evidence.missingEntities / evidence.entities : 0;
  return (
    model.bias +
    model.similarity * Math.max(evidence.similarity ?? 0, 0) +
    model.coverage * Math.min(evidence.coverage, 1) +
    model.bm25 * Math.min(evidence.bm25, 1.5) +
    model.fused * Math.min(evidence.fused, 1) -
    model.missingEntity * Math.min(evidence.missingEntities, 2) * (0.5 + 0.5 * missingShare)
  );
}

/**
 * Scores that fall along the given order (isotonic regression, pool adjacent violators): a
 * result never shows a higher score than the one ranked above it, and each score stays as close
 * as possible to its own calibrated value.
 */
export function monotoneScores(scores: number[]): number[] {
  const blocks: { sum: number; count: number }[] = [];
  for (const score of scores) {
    blocks.push({ sum: score, count: 1 });
    while (blocks.length > 1) {
      const last = blocks[blocks.length - 1]!;
      const previous = blocks[blocks.length - 2]!;
      if (previous.sum / previous.count >= last.sum / last.count) break;
      previous.sum += last.sum;
      previous.count += last.count;
      blocks.pop();
    }
  }
  return blocks.flatMap((block) => Array<number>(block.count).fill(block.sum / block.count));
}
