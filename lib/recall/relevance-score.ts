/**
 * Calibrated relevance: a logistic model over evidence whose scale does not
 * depend on the query, so 0.7 means the same thing for every query.
 *
 * - similarity: cosine between the query and the chunk embeddings (absolute).
 * - coverage: share of the query's findable idf mass that the chunk contains
 *   (terms that occur nowhere in the searched hubs cannot be matched by any
 *   memory and are left out, so vocabulary mismatch does not count against one).
 * - bm25: BM25 divided by the same idf mass (≈ coverage, adjusted for term
 *   frequency and chunk length).
 * - missing entities: identifiers and proper names of the query the memory
 *   never mentions — the signature of a near miss ("rotate the Stripe key"
 *   answered with "rotate the Twilio key").
 *
 * Weights were fitted by hand against the eval corpus (eval/), then rounded;
 * see docs/recall.md for how to re-check calibration.
 */
export interface RelevanceEvidence {
  similarity: number | null;
  coverage: number;
  bm25: number;
  missingEntities: number;
  entities: number;
}

export const SCORE_MODEL = {
  hybrid: { bias: -5.4, similarity: 8.0, coverage: 2.2, bm25: 0.8, missingEntity: 1.6 },
  // No embeddings (no model, or the memory is not embedded yet): words are all the evidence there is.
  lexical: { bias: -3.2, similarity: 0, coverage: 4.2, bm25: 1.2, missingEntity: 1.6 },
};

/** Results scoring below this are dropped: an unrelated query returns nothing. */
export const RELEVANCE_FLOOR = 0.35;

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

export function relevanceScore(evidence: RelevanceEvidence): number {
  const model = evidence.similarity === null ? SCORE_MODEL.lexical : SCORE_MODEL.hybrid;
  const missingShare = evidence.entities > 0 ? evidence.missingEntities / evidence.entities : 0;
  const z =
    model.bias +
    model.similarity * Math.max(evidence.similarity ?? 0, 0) +
    model.coverage * Math.min(evidence.coverage, 1) +
    model.bm25 * Math.min(evidence.bm25, 1.5) -
    model.missingEntity * Math.min(evidence.missingEntities, 2) * (0.5 + 0.5 * missingShare);
  return sigmoid(z);
}
