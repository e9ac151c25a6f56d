import type { MergeConfigsBody } from "./config-fields.ts";

/** Above this many line pairs the merge does not align lines and appends instead. */
const MAX_ALIGN_CELLS = 4_000_000;

/**
 * POST /v1/configs/merge without a chat model: a line-level union. Lines both
 * versions share keep their order; lines only one side has are kept where
 * they stood (cloud's first at each gap). Nothing from either side is dropped,
 * so the owner edits the result rather than recovering lost text.
 */
export function mergeConfigs(input: MergeConfigsBody): { merged_content: string; strategy: "line_union" | "append" } {
  const a = input.cloud_content.split("\n");
  const b = input.local_content.split("\n");
  if (input.cloud_content === input.local_content) return { merged_content: input.cloud_content, strategy: "line_union" };
  if (a.length * b.length > MAX_ALIGN_CELLS) {
    const cloudLines = new Set(a);
    const extra = b.filter((line) => line.trim() !== "" && !cloudLines.has(line));
    // Not `replace(/\n+$/, "")`: on a long run of newlines followed by other text that regex is quadratic.
    let end = input.cloud_content.length;
    while (end > 0 && input.cloud_content[end - 1] === "\n") end--;
    return { merged_content: [input.cloud_content.slice(0, end), "", ...extra, ""].join("\n"), strategy: "append" };
  }
  // Longest common subsequence table, bottom-up.
  const n = a.length;
  const m = b.length;
  const width = m + 1;
  const lcs = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * width + j] = a[i] === b[j] ? lcs[(i + 1) * width + j + 1]! + 1 : Math.max(lcs[(i + 1) * width + j]!, lcs[i * width + j + 1]!);
    }
  }
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push(a[i]!);
      i++;
      j++;
    } else if (j >= m || (i < n && lcs[(i + 1) * width + j]! >= lcs[i * width + j + 1]!)) {
      out.push(a[i]!);
      i++;
    } else {
      out.push(b[j]!);
      j++;
    }
  }
  return { merged_content: out.join("\n"), strategy: "line_union" };
}
