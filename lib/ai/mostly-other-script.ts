/**
 * Whether most of a question's letters are in a script other than Latin (a CJK character counts as
 * one letter, though it often is a whole word). An English-only model's embedding of such a question
 * says little about it, and fused in, its cosines push down what the lexical leg found on its own
 * (product names, identifiers, CJK bigrams in a memory written in that language): recall orders such
 * a question by the lexical leg alone. Not fitted on any corpus: "most" is half, and the rule
 * follows what the model was trained on. docs/recall.md has its effect.
 */
export function mostlyOtherScript(text: string): boolean {
  const letters = text.match(/\p{L}/gu)?.length ?? 0;
  const latin = text.match(/(?=\p{L})\p{Script=Latin}/gu)?.length ?? 0;
  return letters > 0 && latin < letters / 2;
}
