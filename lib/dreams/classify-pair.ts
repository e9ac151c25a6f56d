import type { DreamConfig } from "./dream-config.ts";
import { isValueToken, jaccard, type TextFeatures } from "./text-features.ts";

export type PairVerdict =
  | { kind: "duplicate"; reason: string }
  | { kind: "contradiction"; reason: string; key: string; values: [string, string] }
  | { kind: "distinct"; reason: string };

/**
 * Decides what two similar memories are to each other. Order matters: a
 * disagreement on a value is a contradiction even when the texts are nearly
 * identical, and two texts that each name a different entity ("rotate the
 * Stripe key" / "rotate the Twilio key") are distinct however similar.
 */
export function classifyPair(a: TextFeatures, b: TextFeatures, cosine: number, config: Pick<DreamConfig, "duplicateCosine" | "duplicateJaccard" | "contradictionCosine">): PairVerdict {
  // A similarity threshold set below the contradiction floor (an owner's dreams_similarity_threshold)
  // lets duplicates through from there; contradictions keep their own floor. Gated by the latter alone,
  // a threshold of 0.7 merged nothing a threshold of 0.8 would not.
  if (cosine < Math.min(config.contradictionCosine, config.duplicateCosine)) return { kind: "distinct", reason: "not similar enough" };
  const verdict = classifySimilar(a, b, cosine, config);
  // Below the floor a disagreement is not flagged, but it is no duplicate either: skipping the checks
  // there, "timeout is 30 seconds" / "… 60 seconds" merged and the older value was archived unreviewed.
  if (verdict.kind === "contradiction" && cosine < config.contradictionCosine) return { kind: "distinct", reason: `disagree below the contradiction floor: ${verdict.reason}` };
  return verdict;
}

function classifySimilar(a: TextFeatures, b: TextFeatures, cosine: number, config: Pick<DreamConfig, "duplicateCosine" | "duplicateJaccard">): PairVerdict {
  const onlyA = [...a.words].filter((w) => !b.words.has(w));
  const onlyB = [...b.words].filter((w) => !a.words.has(w));
  const entityA = onlyA.filter((w) => a.entities.has(w));
  const entityB = onlyB.filter((w) => b.entities.has(w));
  const differentSubjects = entityA.length > 0 && entityB.length > 0;

  // The same setting with two different values.
  if (!differentSubjects) {
    for (const [key, value] of a.settings) {
      const other = b.settings.get(key);
      if (other !== undefined && other !== value && valuesDisagree(value, other)) {
        return { kind: "contradiction", reason: `"${key}" is "${value}" in one and "${other}" in the other`, key, values: [value, other] };
      }
    }
  }
  // Everything that differs is a value (numbers, on/off, always/never…).
  const valuesA = onlyA.filter(isValueToken);
  const valuesB = onlyB.filter(isValueToken);
  if (valuesA.length > 0 && valuesB.length > 0 && valuesA.length === onlyA.length && valuesB.length === onlyB.length) {
    const va = valuesA.join(" ");
    const vb = valuesB.join(" ");
    return { kind: "contradiction", reason: `the same statement with "${va}" in one and "${vb}" in the other`, key: [...a.words].filter((w) => b.words.has(w)).slice(0, 4).join(" "), values: [va, vb] };
  }
  // One says it, the other says the opposite.
  const overlap = jaccard(a.words, b.words);
  if (a.negated !== b.negated && overlap >= 0.75 && !differentSubjects) {
    return { kind: "contradiction", reason: "one states what the other negates", key: [...a.words].filter((w) => b.words.has(w)).slice(0, 4).join(" "), values: a.negated ? ["not", "yes"] : ["yes", "not"] };
  }
  if (differentSubjects) return { kind: "distinct", reason: `about different things (${entityA[0]} / ${entityB[0]})` };
  if (cosine >= config.duplicateCosine && overlap >= config.duplicateJaccard) {
    return { kind: "duplicate", reason: `near-duplicate (similarity ${cosine.toFixed(2)}, word overlap ${overlap.toFixed(2)})` };
  }
  return { kind: "distinct", reason: "related but different" };
}

function valuesDisagree(a: string, b: string): boolean {
  // "30 seconds" vs "30 seconds in staging" is elaboration, not disagreement.
  const wa = new Set(a.split(" "));
  const wb = new Set(b.split(" "));
  const aInB = [...wa].every((w) => wb.has(w));
  const bInA = [...wb].every((w) => wa.has(w));
  return !aInB && !bInA;
}
