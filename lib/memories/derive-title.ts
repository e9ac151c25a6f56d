import { atxHeading, codeFences } from "@/lib/processing/markdown-lines.ts";

const MAX_DERIVED_TITLE = 80;

/**
 * First markdown heading, else the first non-empty line, trimmed to 80 characters. Lines inside fenced
 * code blocks are neither: a shell comment (`# install deps`) in a snippet is not the note's heading,
 * nor is the fence itself its first line. Content that is all code falls back to its first code line.
 */
export function deriveTitle(content: string): string {
  const prose: string[] = [];
  const code: string[] = [];
  const fence = codeFences();
  for (const line of content.split(/\r?\n/)) {
    const part = fence(line);
    if (part === "text") prose.push(line);
    else if (part === "code") code.push(line);
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
