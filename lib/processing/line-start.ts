/**
 * In place of `^` (flag m) before `\s*` and a non-space: the first line start of a run of spaces,
 * or one just past the previous match. `^\s*` retried at every line start of a run of blank lines
 * and rescanned the run each time, quadratic in it; every other line start of the run reaches the
 * same end of the run and fails or matches alike, so skipping them matches the same text.
 */
export const RUN_START = String.raw`(?:(?<![\s\S])|(?<=\S[^\S\n\u2028\u2029]*[\n\u2028\u2029])|(?<=[\n\u2028\u2029])(?=[^\S\n\u2028\u2029]*(?:[\n\u2028\u2029][^\S\n\u2028\u2029]*)?(?:\S|(?![\s\S]))))`;
