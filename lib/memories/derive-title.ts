import { atxHeading } from "@/lib/processing/markdown-heading.ts";

const MAX_DERIVED_TITLE = 80;

// A fenced code block opens with ``` or ~~~ (up to three spaces of indent) and closes with a run of the
// same character at least as long (CommonMark).
const FENCE = /^\s{0,3}(`{3,}|~{3,})/;

/**
 * First markdown heading, else the first non-empty line, trimmed to 80 characters. Lines inside fenced
 * code blocks are neither: a shell comment (`# install deps`) in a snippet is not the note's heading,
 * nor is the fence itself its first line. Content that is all code falls back to its first code line.
 */
export function deriveTitle(content: string): string {
  const prose: string[] = [];
  const code: string[] = [];
  let fence: string | undefined;
  for (const line of content.split(/\r?\n/)) {
    const marker = FENCE.exec(line)?.[1];
    if (fence === undefined && marker) {
      fence = marker;
    } else if (fence !== undefined) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = undefined;
      else code.push(line);
    } else {
      prose.push(line);
    }
  }
  const heading = prose.map((line) => atxHeading(line)?.text).find((text) => text);
  const nonEmpty = (lines: string[]) => lines.find((line) => line.trim() !== "");
  const source = heading ?? nonEmpty(prose) ?? nonEmpty(code);
  const title = (source ?? "").trim().replace(/\s+/g, " ");
  if (title.length <= MAX_DERIVED_TITLE) return title || "Untitled";
  const cut = title.slice(0, MAX_DERIVED_TITLE - 1);
  const space = cut.lastIndexOf(" ");
  return `${space > 40 ? cut.slice(0, space) : cut}…`;
}
