import { fromZoneWallClock, toZoneWallClock } from "./zone-offset.ts";

/** What recall understood from the natural-language query, before any database work. */
export const INTENTS = ["how_to", "why", "what_is", "where", "debug", "reference", "temporal", "general"] as const;
export type Intent = (typeof INTENTS)[number];

export interface QueryMember {
  id: string;
  name: string;
}

export interface QueryAnalysis {
  intent: Intent;
  /** The query without the time and author phrases that became filters; what is searched. */
  searchText: string;
  createdAfter?: Date;
  createdBefore?: Date;
  timePhrase?: string;
  author?: { id: string; name: string; phrase: string };
  /**
   * Specific names in the query (identifiers, error codes, proper nouns, numbers with
   * letters). A memory that never mentions one is usually a near miss, not an answer.
   */
  entities: string[];
}

const DAY = 86_400_000;
const MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];
const MONTH_ABBR = MONTHS.map((m) => m.slice(0, 3));
const MONTH_WORD = `(${MONTHS.join("|")}|${MONTH_ABBR.filter((m) => m !== "may").join("|")})`;
const UNIT_DAYS: Record<string, number> = { day: 1, week: 7, month: 30, year: 365 };
const NUMBER_WORDS: Record<string, number> = { a: 1, an: 1, one: 1, two: 2, three: 3, four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9, ten: 10, few: 3, couple: 2 };

// Generic technical acronyms say nothing about which memory is meant.
const GENERIC_ACRONYMS = new Set([
  "API", "APIS", "URL", "URLS", "SQL", "CI", "CD", "PR", "PRS", "UI", "UX", "DB", "ID", "IDS", "HTTP", "HTTPS", "JSON", "YAML", "CLI",
  "SDK", "OS", "TODO", "FAQ", "I", "OK", "CSV", "HTML", "CSS", "JS", "TS", "MD", "IO", "CPU", "RAM", "TLS", "SSL", "DNS", "ENV",
]);
const QUESTION_WORDS = new Set([
  "how", "what", "why", "where", "when", "which", "who", "whom", "whose", "is", "are", "do", "does", "did", "can", "could", "should",
  "would", "will", "was", "were", "the", "a", "an", "in", "on", "for", "to", "of", "and", "or", "our", "we", "my", "i", "show", "find",
  "list", "tell", "give", "explain", "any", "has", "have", "there", "it", "this", "that", "with", "from", "by", "about",
]);

/** The verbs that make a name an author cue ("what Mira found", "did Mira push"); the one list both checks use. */
export const AUTHOR_VERB_LIST = [
  "push", "pushed", "write", "wrote", "written", "say", "said", "add", "added", "note", "noted", "decide", "decided", "record", "recorded",
  "log", "logged", "save", "saved", "share", "shared", "post", "posted", "mention", "mentioned", "find", "found", "learn", "learned",
  "document", "documented", "report", "reported", "figure", "figured",
] as const;
const AUTHOR_VERBS = AUTHOR_VERB_LIST.join("|");
const MENTIONS_SOMEONE = new RegExp(`\\b(by|from|did)\\s+\\S|\\S(?:'s|’s)(?=\\s|$)|\\b(${AUTHOR_VERBS})\\b`, "i");

/**
 * Whether the query may hold an author cue (any cue extractAuthor knows). Cheap, and never
 * false when extractAuthor could match: recall skips reading the members' names otherwise.
 */
export function mentionsSomeone(query: string): boolean {
  return MENTIONS_SOMEONE.test(query);
}

/** `timeZone` (X-Timezone) places "today", "yesterday", "this week", "in March" on the caller's calendar. */
export function analyzeQuery(query: string, now: Date, members: QueryMember[], timeZone?: string): QueryAnalysis {
  let text = ` ${query.replace(/\s+/g, " ").trim()} `;
  const analysis: QueryAnalysis = { intent: "general", searchText: "", entities: [] };

  const time = extractZonedTime(text, now, timeZone);
  if (time) {
    analysis.createdAfter = time.after;
    analysis.createdBefore = time.before;
    analysis.timePhrase = time.phrase.trim();
    text = text.replace(time.phrase, " ");
  }
  const author = extractAuthor(text, members);
  if (author) {
    analysis.author = { id: author.member.id, name: author.member.name, phrase: author.phrase.trim() };
    text = text.replace(author.phrase, " ");
  }
  analysis.searchText = text.replace(/\s+/g, " ").replace(/^[\s,;:]+|[\s,;:]+$/g, "").trim() || query.trim();
  analysis.intent = classifyIntent(query, Boolean(time));
  analysis.entities = extractEntities(analysis.searchText);
  return analysis;
}

function classifyIntent(query: string, hasTime: boolean): Intent {
  const q = query.toLowerCase();
  if (/\b(error|errors|exception|fail(s|ed|ing|ure)?|crash(es|ed|ing)?|bug|broken|traceback|stack ?trace|not working|doesn'?t work|panic|segfault|timeout|timed out|refused|denied|oom|leak)\b/.test(q) || /\b[A-Z]{2,}_[A-Z_]+\b|\bE[0-9]{3,}\b|\b[45][0-9]{2} (error|status)\b/.test(query)) {
    return "debug";
  }
  if (/^\s*why\b|\b(reason|reasons|rationale|motivation|decid(e|ed|ing)|decision|chose|choose|chosen|trade-?offs?)\b/.test(q)) return "why";
  if (/^\s*how (do|to|can|should|would|did)\b|\bhow to\b|\b(steps?|guide|walkthrough|set ?up|install|configure|procedure|instructions?)\b/.test(q)) return "how_to";
  if (/^\s*where\b|\b(which (file|folder|directory|repo|server|bucket|channel))\b|\blocated\b|\blocation of\b/.test(q)) return "where";
  if (hasTime || /^\s*when\b|\b(yesterday|today|recent(ly)?|latest|last (week|month|time)|timeline|history of|changelog|ago)\b/.test(q)) return "temporal";
  if (/^\s*(what|who) (is|are|was|were|does)\b|\b(define|definition|meaning of|what does .* mean|explain)\b/.test(q)) return "what_is";
  if (/\b(port|version|command|flag|env(ironment)? var(iable)?s?|config(uration)?|url|endpoint|value of|limit of|id of|key for|path to|name of|list of|cheat ?sheet|syntax)\b/.test(q)) {
    return "reference";
  }
  return "general";
}

interface TimeMatch {
  phrase: string;
  after?: Date;
  before?: Date;
}

function startOfDay(date: Date): Date {
  return new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()));
}

/** Time phrases on the caller's calendar: computed on wall-clock time, turned back into instants. */
function extractZonedTime(text: string, now: Date, timeZone: string | undefined): TimeMatch | undefined {
  if (!timeZone) return extractTime(text, now);
  const found = extractTime(text, toZoneWallClock(now, timeZone));
  return (
    found && {
      phrase: found.phrase,
      after: found.after && fromZoneWallClock(found.after, timeZone),
      before: found.before && fromZoneWallClock(found.before, timeZone),
    }
  );
}

/** Simple English time phrases, in UTC, relative to `now`. */
function extractTime(text: string, now: Date): TimeMatch | undefined {
  const today = startOfDay(now);
  const lower = text.toLowerCase();
  const at = (pattern: RegExp) => {
    const match = pattern.exec(lower);
    return match ? { match, phrase: text.slice(match.index, match.index + match[0].length) } : undefined;
  };

  let found = at(/\b(from |on |since )?(today|this morning|this afternoon|tonight)\b/);
  if (found) return { phrase: found.phrase, after: today };
  found = at(/\b(from |on )?yesterday\b/);
  if (found) return { phrase: found.phrase, after: new Date(today.getTime() - DAY), before: today };
  found = at(/\b(in |during |from |over )?(the )?(last|past|previous) (\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of) (day|week|month|year)s?\b/);
  if (found) {
    const n = numberValue(found.match[4]!);
    return { phrase: found.phrase, after: new Date(now.getTime() - n * UNIT_DAYS[found.match[5]!]! * DAY) };
  }
  found = at(/\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of) (day|week|month|year)s? ago\b/);
  if (found) {
    const n = numberValue(found.match[1]!);
    const unit = UNIT_DAYS[found.match[2]!]! * DAY;
    // "3 days ago" means around then: a window of one unit on either side.
    return { phrase: found.phrase, after: new Date(now.getTime() - (n + 1) * unit), before: new Date(now.getTime() - Math.max(n - 1, 0) * unit + DAY) };
  }
  found = at(/\b(in |during |from )?(this|last) (week|month|year)\b/);
  if (found) {
    const unit = found.match[3]!;
    const start = unitStart(today, unit, found.match[2] === "last" ? -1 : 0);
    const end = found.match[2] === "last" ? unitStart(today, unit, 0) : undefined;
    return { phrase: found.phrase, after: start, before: end };
  }
  found = at(new RegExp(`\\b(in |during |from |since )(early |late |mid-? ?)?${MONTH_WORD}( (\\d{4}))?\\b`));
  if (found) {
    const month = monthIndex(found.match[3]!);
    const explicitYear = found.match[5] ? Number(found.match[5]) : undefined;
    // Without a year, "in March" is the most recent March that has started.
    const year = explicitYear ?? (month <= now.getUTCMonth() ? now.getUTCFullYear() : now.getUTCFullYear() - 1);
    const after = utcMonthStart(year, month);
    if (found.match[1] === "since ") return { phrase: found.phrase, after };
    return { phrase: found.phrase, after, before: utcMonthStart(year, month + 1) };
  }
  found = at(/\b(in|during|since) (20\d{2})\b/);
  if (found) {
    const year = Number(found.match[2]);
    const after = new Date(Date.UTC(year, 0, 1));
    return found.match[1] === "since" ? { phrase: found.phrase, after } : { phrase: found.phrase, after, before: new Date(Date.UTC(year + 1, 0, 1)) };
  }
  return undefined;
}

/** Date.UTC reads years 0-99 as 1900-1999, so "March 0050" needs its year set on its own. */
function utcMonthStart(year: number, month: number): Date {
  const date = new Date(0);
  date.setUTCFullYear(year, month, 1);
  return date;
}

function numberValue(word: string): number {
  const cleaned = word.replace(/ of$/, "");
  return /^\d+$/.test(cleaned) ? Math.min(Number(cleaned), 3650) : (NUMBER_WORDS[cleaned] ?? 1);
}

function monthIndex(word: string): number {
  const full = MONTHS.indexOf(word);
  return full >= 0 ? full : MONTH_ABBR.indexOf(word);
}

function unitStart(today: Date, unit: string, offset: number): Date {
  if (unit === "week") {
    const monday = new Date(today.getTime() - ((today.getUTCDay() + 6) % 7) * DAY);
    return new Date(monday.getTime() + offset * 7 * DAY);
  }
  if (unit === "month") return new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() + offset, 1));
  return new Date(Date.UTC(today.getUTCFullYear() + offset, 0, 1));
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * "what did Mira push", "notes by Mira", "Mira's notes", "Mira wrote": an author
 * filter only when the name is a cue's object and names exactly one member.
 */
function extractAuthor(text: string, members: QueryMember[]): { member: QueryMember; phrase: string } | undefined {
  const names = new Map<string, QueryMember[]>();
  for (const member of members) {
    const full = member.name.trim().toLowerCase();
    if (!full) continue;
    const first = full.split(/\s+/)[0]!;
    for (const key of new Set([full, first])) {
      if (key.length < 2) continue;
      names.set(key, [...(names.get(key) ?? []), member]);
    }
  }
  const keys = [...names.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
  if (keys.length === 0) return undefined;
  const name = `(${keys.join("|")})`;
  const cues = [
    new RegExp(`\\bdid ${name} (${AUTHOR_VERBS})\\b`, "i"),
    new RegExp(`\\b(pushed |written |added |saved |shared |posted |noted |recorded |logged |documented )?(by|from) ${name}\\b`, "i"),
    new RegExp(`\\b${name}(?:'s|’s)(?= )`, "i"),
    new RegExp(`\\b${name} (${AUTHOR_VERBS}|has (${AUTHOR_VERBS}))\\b`, "i"),
  ];
  for (const cue of cues) {
    const match = cue.exec(text);
    if (!match) continue;
    const key = match.slice(1).find((group) => group !== undefined && names.has(group.toLowerCase()));
    const candidates = key ? names.get(key.toLowerCase())! : [];
    const unique = new Map(candidates.map((member) => [member.id, member]));
    if (unique.size !== 1) continue;
    return { member: [...unique.values()][0]!, phrase: match[0] };
  }
  return undefined;
}

function extractEntities(text: string): string[] {
  const entities = new Set<string>();
  const words = text.split(/[\s,;!?()"“”[\]{}]+/).filter(Boolean);
  words.forEach((raw, index) => {
    const word = raw.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, "").replace(/(?:'s|’s)$/, "");
    if (word.length < 2 || GENERIC_ACRONYMS.has(word.toUpperCase()) && !/[_.:/]/.test(word)) return;
    if (QUESTION_WORDS.has(word.toLowerCase()) || MONTHS.includes(word.toLowerCase())) return;
    const identifier = /[A-Za-z][_.:/-]*[0-9]|[0-9][_.:/-]*[A-Za-z]|[A-Za-z0-9][_./:][A-Za-z0-9]|[a-z][A-Z]/.test(word);
    const acronym = /^[A-Z][A-Z0-9]{1,}$/.test(word);
    const properNoun = index > 0 && /^\p{Lu}\p{Ll}+/u.test(word);
    if (identifier || acronym || properNoun) entities.add(word);
  });
  return [...entities].slice(0, 8);
}
