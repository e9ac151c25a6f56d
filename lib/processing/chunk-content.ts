import { estimateTokens } from "./estimate-tokens.ts";
import { atxHeading, codeFences } from "./markdown-lines.ts";

export interface ChunkDraft {
  position: number;
  content: string;
  headingChain: string;
  tokenCount: number;
}

/**
 * Chunk sizes in estimated word pieces. The local model reads at most 256
 * pieces per chunk, so chunks aim just under that; the spread (80..320) lets
 * section and function boundaries win over exact sizes.
 */
export const CHUNK_TARGET_TOKENS = 240;
export const CHUNK_MAX_TOKENS = 320;
const CHUNK_MIN_TOKENS = 80;
/** Memories up to this size are one chunk, whatever their shape. */
export const SINGLE_CHUNK_MAX_TOKENS = CHUNK_MAX_TOKENS;
/** A 3 MiB memory still yields a bounded number of rows and embeddings. */
export const MAX_CHUNKS = 2_000;

interface Unit {
  text: string;
  tokens: number;
  chain: string;
  /** Start a new chunk here when the current one is big enough (a section or definition boundary). */
  boundary: boolean;
  /** Separator placed before this unit inside a chunk (default a blank line). */
  sep?: string;
}

/** Splits a memory into retrieval chunks, following the structure of its content type. */
export function chunkContent(content: string, contentType: string): ChunkDraft[] {
  const text = content.replace(/\r\n?/g, "\n").trim();
  if (!text) return [];
  const total = estimateTokens(text);
  if (total <= SINGLE_CHUNK_MAX_TOKENS) {
    const chain = contentType === "markdown" ? (firstHeading(text) ?? "") : contentType === "code" ? (firstDefinition(text) ?? "") : "";
    return [{ position: 0, content: text, headingChain: chain, tokenCount: total }];
  }
  const units =
    contentType === "markdown"
      ? markdownUnits(text)
      : contentType === "code"
        ? codeUnits(text)
        : contentType === "chat" || contentType === "transcript"
          ? turnUnits(text)
          : contentType === "structured"
            ? lineUnits(text)
            : paragraphUnits(text, "");
  return pack(units).slice(0, MAX_CHUNKS);
}

// ------------------------------------------------------------------------------------- packing

function pack(units: Unit[]): ChunkDraft[] {
  const chunks: ChunkDraft[] = [];
  let parts: Unit[] = [];
  let tokens = 0;
  const flush = () => {
    if (parts.length === 0) return;
    // Only blank lines are trimmed: a code chunk that starts mid-function keeps its indentation.
    const content = parts.map((p, i) => (i === 0 ? p.text : `${p.sep ?? "\n\n"}${p.text}`)).join("").replace(/^\s*\n/, "").trimEnd(); // not \s+$, quadratic in a run of spaces
    if (content) chunks.push({ position: chunks.length, content, headingChain: dominantChain(parts), tokenCount: estimateTokens(content) });
    parts = [];
    tokens = 0;
  };
  for (const unit of units.flatMap(splitOversized)) {
    const atBoundary = unit.boundary && tokens >= CHUNK_MIN_TOKENS;
    // Past the target a new chunk starts, except for a small unit (a code fence, a closing line) that still fits.
    const wouldOverflow = tokens + unit.tokens > CHUNK_TARGET_TOKENS && tokens >= CHUNK_MIN_TOKENS && unit.tokens >= CHUNK_MIN_TOKENS / 2;
    const hardOverflow = tokens + unit.tokens > CHUNK_MAX_TOKENS;
    if (parts.length > 0 && (atBoundary || wouldOverflow || hardOverflow)) flush();
    parts.push(unit);
    tokens += unit.tokens;
  }
  flush();
  // A small tail reads better attached to its predecessor when both fit.
  const last = chunks.at(-1);
  const previous = chunks.at(-2);
  if (last && previous && last.tokenCount < CHUNK_MIN_TOKENS / 2 && previous.tokenCount + last.tokenCount <= CHUNK_MAX_TOKENS) {
    previous.content = `${previous.content}\n\n${last.content}`; // tails start at a unit boundary
    previous.tokenCount = estimateTokens(previous.content);
    chunks.pop();
  }
  return chunks;
}

/** The heading chain that contributes most of the chunk's text. */
function dominantChain(parts: Unit[]): string {
  const weights = new Map<string, number>();
  for (const part of parts) weights.set(part.chain, (weights.get(part.chain) ?? 0) + part.tokens);
  let best = parts[0]!.chain;
  for (const [chain, weight] of weights) if (weight > (weights.get(best) ?? 0)) best = chain;
  return best;
}

/** Units over the maximum are cut at lines, then sentences, then words. */
function splitOversized(unit: Unit): Unit[] {
  if (unit.tokens <= CHUNK_MAX_TOKENS) return [unit];
  const pieces = splitText(unit.text);
  return pieces.map((text, i) => ({
    text,
    tokens: estimateTokens(text),
    chain: unit.chain,
    boundary: i === 0 && unit.boundary,
    sep: i === 0 ? unit.sep : "\n",
  }));
}

function splitText(text: string): string[] {
  const byLine = text.split("\n");
  const separators: [string[], string][] = [
    [byLine, "\n"],
    [sentences(text), " "],
    // Chinese and Japanese put no space after a sentence's end.
    [text.split(/(?<=[。！？；])(?=\S)/u), ""],
    [text.split(/\s+/), " "],
  ];
  for (const [pieces, joiner] of separators) {
    if (pieces.length < 2) continue;
    const groups: string[] = [];
    let current: string[] = [];
    let tokens = 0;
    for (const piece of pieces) {
      const t = estimateTokens(piece);
      if (current.length > 0 && tokens + t > CHUNK_TARGET_TOKENS) {
        groups.push(current.join(joiner));
        current = [];
        tokens = 0;
      }
      current.push(piece);
      tokens += t;
    }
    if (current.length) groups.push(current.join(joiner));
    // A single line or sentence may still be too long: cut it further.
    return groups.flatMap((group) => (estimateTokens(group) > CHUNK_MAX_TOKENS && group !== text ? splitText(group) : [group]));
  }
  // One enormous "word" (minified code, base64, a run of Chinese without punctuation): cut by
  // characters, fewer where each is a token of its own.
  const out: string[] = [];
  for (let i = 0; i < text.length; ) {
    let piece = text.slice(i, i + CHUNK_TARGET_TOKENS * 4);
    if (estimateTokens(piece) > CHUNK_MAX_TOKENS) piece = Array.from(text.slice(i, i + CHUNK_TARGET_TOKENS * 2)).slice(0, CHUNK_TARGET_TOKENS).join("");
    out.push(piece);
    i += piece.length;
  }
  return out;
}

export function sentences(text: string): string[] {
  return text
    .split(/(?<=[.!?…。！？])\s+(?=["'“‘(\[]?[\p{Lu}\p{N}])|\n{2,}/u)
    .map((s) => s.trim())
    .filter(Boolean);
}

// ------------------------------------------------------------------------------------ markdown

export function firstHeading(text: string): string | undefined {
  const fence = codeFences();
  for (const line of text.split("\n")) {
    const match = fence(line) === "text" && atxHeading(line);
    if (match) return cleanHeading(match.text);
  }
  return undefined;
}

function cleanHeading(text: string): string {
  return replaceLinks(text.replace(/[*_`]/g, ""), false).trim().slice(0, 120);
}

/**
 * Markdown links `[label](url)` replaced by their label (images `![alt](url)` removed when `images`),
 * matching what `/\[([^\]]+)\]\([^)]*\)/g` (`/!\[[^\]]*\]\([^)]*\)/g`) did. Those regexes rescan
 * to the end of the text from every `[` that has no closing bracket, quadratic on a long run of
 * `[(`; this finds each closing bracket once.
 */
export function replaceLinks(text: string, images: boolean): string {
  let out = "";
  let from = 0;
  const opener = images ? "![" : "[";
  for (let i = text.indexOf(opener); i !== -1; ) {
    const labelStart = i + opener.length;
    const close = text.indexOf("]", labelStart);
    if (close === -1) break;
    if ((!images && close === labelStart) || text[close + 1] !== "(") {
      // Every opener before this `]` ends its label here too, so none of them can match.
      i = text.indexOf(opener, images ? close : close + 1);
      continue;
    }
    const end = text.indexOf(")", close + 2);
    if (end === -1) break;
    out += text.slice(from, i) + (images ? "" : text.slice(labelStart, close));
    from = end + 1;
    i = text.indexOf(opener, from);
  }
  return out + text.slice(from);
}

/** Sections under their heading chain ("Release process > Rollback"), cut into blank-line blocks. */
function markdownUnits(text: string): Unit[] {
  const units: Unit[] = [];
  const stack: { level: number; title: string }[] = [];
  let block: string[] = [];
  let sectionStart = true;
  const fence = codeFences();
  const chain = () => stack.map((h) => h.title).join(" > ");
  const flushBlock = () => {
    const body = block.join("\n").trim();
    block = [];
    if (!body) return;
    units.push({ text: body, tokens: estimateTokens(body), chain: chain(), boundary: sectionStart });
    sectionStart = false;
  };
  for (const line of text.split("\n")) {
    if (fence(line) !== "text") {
      block.push(line);
      continue;
    }
    const heading = atxHeading(line);
    if (heading) {
      flushBlock();
      const level = heading.level;
      while (stack.length && stack.at(-1)!.level >= level) stack.pop();
      stack.push({ level, title: cleanHeading(heading.text) });
      sectionStart = true;
      block.push(line);
      continue;
    }
    if (!line.trim()) {
      // Keep a heading with the paragraph that follows it.
      if (block.length === 1 && atxHeading(block[0]!)) continue;
      flushBlock();
      continue;
    }
    block.push(line);
  }
  flushBlock();
  return units;
}

// ---------------------------------------------------------------------------------------- code

const DEFINITION =
  /^(export\s+)?(default\s+)?(async\s+)?(def|class|function\*?|func|fn|pub\s+fn|pub\s+struct|struct|impl|interface|type|enum|trait|module|const\s+\w+\s*=\s*(async\s*)?\(|public|private|protected|static|package|describe\(|it\(|test\()\b/;

export function firstDefinition(text: string): string | undefined {
  for (const line of text.split("\n")) if (DEFINITION.test(line)) return signature(line);
  return undefined;
}

function signature(line: string): string {
  // Not /\s*[{:]\s*$/: retried at every space of a long run, it was quadratic in the run.
  const end = line.trimEnd();
  const last = end.at(-1);
  return (last === "{" || last === ":" ? end.slice(0, -1) : end).trim().slice(0, 120);
}

/** Blank-line blocks; a top-level definition starts a new unit and names the chunk. */
function codeUnits(text: string): Unit[] {
  const units: Unit[] = [];
  let block: string[] = [];
  let current = "";
  let boundary = false;
  const flushBlock = () => {
    const body = block.join("\n").replace(/^\n+/, "").trimEnd(); // not \s+$, quadratic in a run of spaces
    block = [];
    if (!body) return;
    units.push({ text: body, tokens: estimateTokens(body), chain: current, boundary });
    boundary = false;
  };
  for (const line of text.split("\n")) {
    if (DEFINITION.test(line) || /^(@\w+|#\[)/.test(line)) {
      // Decorators and attributes belong to the definition below them.
      const previousIsDecorator = block.length > 0 && block.every((l) => /^(@\w+|#\[)/.test(l));
      if (!previousIsDecorator) flushBlock();
      if (DEFINITION.test(line)) current = signature(line);
      boundary = true;
      block.push(line);
      continue;
    }
    // Blank lines split blocks only at the top level, so function bodies stay whole when they fit.
    if (!line.trim() && block.length > 0 && !/^\s/.test(block.at(-1) ?? "") && !/[{([,]\s*$/.test(block.at(-1) ?? "")) {
      flushBlock();
      continue;
    }
    block.push(line);
  }
  flushBlock();
  return units;
}

// ---------------------------------------------------------------------------------------- chat

const TURN = /^\s*(\[[^\]]{1,40}\]\s*)?(user|assistant|human|ai|system|[A-Z][\w .'-]{0,30}):\s/i;

/** Conversation turns; a turn is never split unless it alone exceeds the maximum. */
function turnUnits(text: string): Unit[] {
  const units: Unit[] = [];
  let turn: string[] = [];
  const flushTurn = () => {
    const body = turn.join("\n").trim();
    turn = [];
    if (body) units.push({ text: body, tokens: estimateTokens(body), chain: "", boundary: false, sep: "\n" });
  };
  for (const line of text.split("\n")) {
    if (TURN.test(line)) flushTurn();
    turn.push(line);
  }
  flushTurn();
  return units;
}

// ---------------------------------------------------------------------------------------- text

/** Paragraphs; paragraphs over the maximum are cut at sentence ends. */
function paragraphUnits(text: string, chain: string): Unit[] {
  return text
    .split(/\n\s*\n/)
    .map((p) => p.trim())
    .filter(Boolean)
    .flatMap((paragraph) => {
      const tokens = estimateTokens(paragraph);
      if (tokens <= CHUNK_MAX_TOKENS) return [{ text: paragraph, tokens, chain, boundary: false }];
      return sentences(paragraph).map((s, i) => ({ text: s, tokens: estimateTokens(s), chain, boundary: false, sep: i === 0 ? "\n\n" : " " }));
    });
}

function lineUnits(text: string): Unit[] {
  return text
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => ({ text: line, tokens: estimateTokens(line), chain: "", boundary: false, sep: "\n" }));
}
