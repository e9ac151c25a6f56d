const isSpace = (ch: string | undefined) => ch !== undefined && /\s/.test(ch);
// Split on "\n" only, a line can still hold these; `.` in the regexes this replaces matched none of them.
const hasLineBreak = (text: string) => /[\r\u2028\u2029]/.test(text);

/**
 * A line's ATX heading (CommonMark): up to three spaces of indent, one to six `#`, a space, the text,
 * and an optional closing run of `#` that counts only after a space (`# C#` is "C#", `## Setup ##` is
 * "Setup", `# #` is empty). Titles, heading chains, persona names and capture sections all read
 * headings through this one scanner, so one note's heading is the same text everywhere. Scanned, not
 * matched: each regex form of it backtracked polynomially on a long run of spaces inside the line.
 * A line whose text holds a carriage return or Unicode line separator is no heading.
 */
export function atxHeading(line: string): { level: number; text: string } | undefined {
  let p = 0;
  while (p < line.length && isSpace(line[p])) p++;
  if (p > 3) return undefined;
  let q = p;
  while (line[q] === "#") q++;
  const level = q - p;
  if (level < 1 || level > 6 || !isSpace(line[q])) return undefined;
  let start = q;
  while (start < line.length && isSpace(line[start])) start++;
  let end = line.length;
  while (end > start && isSpace(line[end - 1])) end--;
  const hashesEnd = end;
  while (end > start && line[end - 1] === "#") end--;
  // A closing run is one the whole text is, or one after a space; `C#` keeps its `#`.
  if (end < hashesEnd && end > start && !isSpace(line[end - 1])) end = hashesEnd;
  while (end > start && isSpace(line[end - 1])) end--;
  const text = line.slice(start, end);
  return hasLineBreak(text) ? undefined : { level, text };
}

// Spaces only: a tab is four columns of indent, which makes indented code of the line, not a fence.
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/** The fence a line opens, if it opens one: a backtick fence's info string cannot hold a backtick (```x``` is inline code). */
export function openingFence(line: string): string | undefined {
  const marker = FENCE.exec(line)?.[1];
  if (!marker || (marker[0] === "`" && line.slice(line.indexOf(marker) + marker.length).includes("`"))) return undefined;
  return marker;
}

/**
 * Reads a markdown text's lines in order and tells which are fenced code: "fence" for an opening or
 * closing fence line, "code" inside, "text" elsewhere. A fence closes only with a run of its own
 * character at least as long and nothing after it (CommonMark), so a ```` block can show ``` and
 * ~~~ lines, and its `# comments` are never headings; an unclosed fence runs to the end. A line
 * starting ``` with a backtick after it (```x```) opens nothing: CommonMark reads it as inline code,
 * and taken for a fence it hid the headings after it (and a capture's closing ``` opened one).
 */
export function codeFences(): (line: string) => "fence" | "code" | "text" {
  let open: string | undefined;
  return (line) => {
    if (open === undefined) {
      open = openingFence(line);
      return open === undefined ? "text" : "fence";
    }
    const marker = FENCE.exec(line)?.[1];
    if (marker && marker[0] === open[0] && marker.length >= open.length && line.trim() === marker) {
      open = undefined;
      return "fence";
    }
    return "code";
  };
}
