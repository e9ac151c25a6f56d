/**
 * Calibrated relevance: a logistic model over evidence whose scale does not
 * depend on the query, so 0.7 means the same thing for every query.
 *
 * - similarity: cosine between the query and the chunk embeddings (absolute).
 * - coverage: share of the query's idf mass that the chunk contains.
 * - bm25: BM25 divided by the same idf mass (≈ coverage, adjusted for term
 *   frequency and chunk length).
 * - missing entities: identifiers and proper names of the query the memory
 *   never mentions — the signature of a near miss ("rotate the Stripe key"
 *   answered with "rotate the Twilio key").
 *
 * Weights were fitted by grid search against the eval corpus (eval/, real
 * pipeline chunks), choosing the widest gap between the best near-miss trap
 * and the weakest true answer, then rounded; see docs/recall.md.
 */
export interface RelevanceEvidence {
  similarity: number | null;
  coverage: number;
  bm25: number;
  missingEntities: number;
  entities: number;
}

export const SCORE_MODEL = {
  hybrid: { bias: -4.5, similarity: 12.0, coverage: 3.0, bm25: 0, missingEntity: 3.0 },
  // No embeddings (no model, or the memory is not embedded yet): words are all the evidence there is.
  lexical: { bias: -1.9, similarity: 0, coverage: 4.0, bm25: 0.5, missingEntity: 2.0 },
};

/**
 * A candidate far below the query's best one is less likely to be what was
 * asked for, whatever its absolute evidence: its logit loses this share of the gap.
 */
export const GAP_WEIGHT = 0.3;

/** Results scoring below this are dropped: an unrelated query returns nothing. */
export const RELEVANCE_FLOOR = 0.31;
/** The floor when the query's own time or author phrase already selects what is wanted. */
export const DERIVED_FILTER_FLOOR = 0.02;

export const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

/** The model's log-odds; `relevanceScore` turns them into 0..1 given the query's best candidate. */
export function relevanceLogit(evidence: RelevanceEvidence): number {
  const model = evidence.similarity === null ? SCORE_MODEL.lexical : SCORE_MODEL.hybrid;
  const missingShare = evidence.entities > 0 ? evidence.missingEntities / evidence.entities : 0;
  const z =
    model.bias +
    model.similarity * Math.max(evidence.similarity ?? 0, 0) +
    model.coverage * Math.min(evidence.coverage, 1) +
    model.bm25 * Math.min(evidence.bm25, 1.5) -
    model.missingEntity * Math.min(evidence.missingEntities, 2) * (0.5 + 0.5 * missingShare);
  return z;
}

export function relevanceScore(logit: number, bestLogit: number): number {
  return sigmoid(logit - GAP_WEIGHT * Math.max(0, bestLogit - logit));
}
