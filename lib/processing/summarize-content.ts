import { firstDefinition, replaceLinks, sentences } from "./chunk-content.ts";
import { RUN_START } from "./line-start.ts";
import { atxHeading, codeFences } from "./markdown-lines.ts";

export const SUMMARY_MAX_CHARS = 300;

/**
 * A one- or two-sentence extractive summary taken from the content itself:
 * the opening prose (headings, code, tables and markup stripped), skipping a
 * sentence that merely repeats the title. Code and conversations get a
 * descriptive sentence built from what they contain.
 */
export function summarizeContent(content: string, contentType: string, title: string): string {
  const text = content.replace(/\r\n?/g, "\n");
  if (contentType === "code") return summarizeCode(text);
  if (contentType === "chat" || contentType === "transcript") return summarizeChat(text);
  if (contentType === "link") return clipSummary(`Link to ${text.trim().split(/\s+/)[0] ?? ""}.`);
  const prose = proseOf(text, contentType);
  const picked: string[] = [];
  const titleKey = normalize(title);
  for (const sentence of sentences(prose)) {
    if (normalize(sentence) === titleKey) continue;
    picked.push(sentence);
    const length = picked.join(" ").length;
    if (picked.length === 2 || length >= 160) break;
  }
  if (picked.length > 0) return clipSummary(picked.join(" "));
  // No prose at all (only headings, lists of names, a table): describe it by its headings.
  const fence = codeFences();
  const headings = text
    .split("\n")
    .map((line) => (fence(line) === "text" ? atxHeading(line)?.text : undefined))
    .filter((h): h is string => !!h && normalize(h) !== titleKey);
  if (headings.length) return clipSummary(`Covers ${listOf(headings.slice(0, 4))}.`);
  const firstLine = text.split("\n").map((l) => l.trim()).find((l) => l && normalize(l) !== titleKey);
  return clipSummary(firstLine ?? text.trim());
}

// A table row and a blockquote marker, with the blank lines before them, as `^\s*\|.*\|\s*$` and
// `^\s*>\s?` (flag m) matched them, without their quadratic rescans (see RUN_START).
const TABLE_ROW = new RegExp(String.raw`${RUN_START}\s*\|.*\|\s*$`, "gm");
const QUOTE_MARK = new RegExp(String.raw`${RUN_START}\s*>\s?`, "g");
/** Likewise a comment line's marker (`^\s*(\*|\/\/|#)\s?`, flag m) and a chat turn. */
const COMMENT_MARK = new RegExp(String.raw`${RUN_START}\s*(\*|\/\/|#)\s?`, "g");
const TURN = new RegExp(String.raw`${RUN_START}\s*(?:\[[^\]]{1,40}\]\s*)?([A-Za-z][\w .'-]{0,30}):\s+(.+)$`, "gm");

/** Without HTML tags, as replace(/<[^>]+>/g, "") did; that regex rescanned to the end from every unclosed `<`. */
function stripTags(text: string): string {
  let out = "";
  let from = 0;
  for (let i = text.indexOf("<"); i !== -1; ) {
    const close = text.indexOf(">", i + 1);
    if (close === -1) break;
    if (close === i + 1) {
      i = text.indexOf("<", close);
      continue;
    }
    out += text.slice(from, i);
    from = close + 1;
    i = text.indexOf("<", from);
  }
  return out + text.slice(from);
}

/** Prose only: no fenced code, headings, tables, HTML or link/emphasis markup. */
function proseOf(text: string, contentType: string): string {
  let body = text;
  if (contentType === "markdown") {
    const fence = codeFences();
    body = body
      .replace(/^---\n[\s\S]*?\n---\n/, "") // front matter
      .split("\n")
      // Line by line: a fence closes only with its own kind and length (``` inside a ```` block is still
      // code), and the heading regex's `\s+` ran on past an empty heading's line end, taking the next line.
      .map((line) => (fence(line) !== "text" ? "" : atxHeading(line) ? "\n" : line))
      .join("\n")
      .replace(TABLE_ROW, "\n");
    body = replaceLinks(replaceLinks(stripTags(body), true), false)
      .replace(/[*_`]{1,3}([^*_`\n]+)[*_`]{1,3}/g, "$1")
      .replace(QUOTE_MARK, "");
  }
  // List items become sentences of their own so they never run together.
  return body
    .split("\n")
    .map((line) => line.replace(/^\s*([-*+]|\d+[.)])\s+/, "").trim())
    .map((line) => (line && !/[.!?:;…]$/.test(line) ? `${line}.` : line))
    .join("\n")
    .replace(/\n{2,}/g, "\n\n")
    .replace(/(?<!\n)\n(?!\n)/g, " ");
}

function summarizeCode(text: string): string {
  const definitions = [...text.matchAll(/^(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:def|class|function\*?|func|fn|pub fn|struct|interface|type|enum|trait)\s+([A-Za-z_$][\w$]*)/gm)]
    .map((m) => m[1]!)
    .filter((name, i, all) => all.indexOf(name) === i);
  const comment = leadingComment(text);
  const what = definitions.length
    ? `Code defining ${listOf(definitions.slice(0, 5).map((d) => `\`${d}\``))}${definitions.length > 5 ? ` and ${definitions.length - 5} more` : ""}.`
    : `Code starting with \`${(firstDefinition(text) ?? text.trim().split("\n")[0] ?? "").slice(0, 80)}\`.`;
  return clipSummary(comment ? `${comment} ${what}` : what);
}

function leadingComment(text: string): string | undefined {
  // The leading spaces are taken atomically (lookahead and backreference): backtracking into them
  // only let the inner \s* rescan the same run, quadratic on code that opens with a long one.
  const match = /^(?=(\s*))\1(?:\/\*\*?([\s\S]*?)\*\/|((?:\s*(?:\/\/|#)(?!!).*\n?)+)|"""([\s\S]*?)""")/.exec(text);
  if (!match) return undefined;
  const raw = (match[2] ?? match[3] ?? match[4] ?? "").replace(COMMENT_MARK, "").replace(/\s+/g, " ").trim();
  const first = sentences(raw)[0];
  return first && first.length > 10 ? (/[.!?]$/.test(first) ? first : `${first}.`) : undefined;
}

function summarizeChat(text: string): string {
  const turns = [...text.matchAll(TURN)];
  const speakers = [...new Set(turns.map((t) => t[1]!.trim()))];
  const opening = turns[0]?.[2]?.trim();
  const topic = opening ? ` It opens with: "${sentences(opening)[0]?.slice(0, 160) ?? opening.slice(0, 160)}"` : "";
  return clipSummary(`Conversation between ${listOf(speakers.slice(0, 4))}${speakers.length > 4 ? " and others" : ""} (${turns.length} turns).${topic}`);
}

function listOf(items: string[]): string {
  if (items.length <= 1) return items[0] ?? "";
  return `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;
}

function normalize(text: string): string {
  return text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, " ").trim();
}

/** At most SUMMARY_MAX_CHARS, cut at a word: the local summaries, and the chat model's, which may run longer. */
export function clipSummary(text: string): string {
  const clean = text.replace(/\s+/g, " ").trim();
  if (clean.length <= SUMMARY_MAX_CHARS) return clean;
  const cut = clean.slice(0, SUMMARY_MAX_CHARS - 1);
  return `${cut.slice(0, Math.max(cut.lastIndexOf(" "), SUMMARY_MAX_CHARS / 2))}…`;
}
