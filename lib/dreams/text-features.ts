/**
 * Word-level features of a memory for the dream's pair checks: content words
 * (lower-cased, crudely stemmed, stopwords dropped), which of them name an
 * entity, which are values, and "key is value" statements.
 */

const STOPWORDS = new Set(
  ("a an the and or but if then else of to in on at by for with from into onto over under about as is are was were be been being am do does did " +
    "this that these those it its we our you your they their he she his her i me my us them there here so such than too very can could should would will shall may might must " +
    "each every all any some no nor not only own same just also again further once both few more most other out up down off has have had having what which who whom when where why how " +
    "using use used uses via per").split(" "),
);

/** A negated statement ("deploys do not run on Fridays"), not a contrast ("use pnpm, not npm"). */
const NEGATION_RE = /\b(?:never|cannot|can't|won't|don't|doesn't|didn't|isn't|aren't|wasn't|shouldn't|mustn't|(?:do|does|did|is|are|was|were|should|must|will|can|could|would|may) not)\b/i;

const VALUE_WORDS = new Set(["true", "false", "on", "off", "enabled", "disabled", "yes", "no", "always", "never", "allowed", "forbidden", "required", "optional", "daily", "weekly", "monthly", "hourly"]);

const TOKEN_RE = /[A-Za-z0-9][A-Za-z0-9_.'-]*[A-Za-z0-9]|[A-Za-z0-9]/g;

export function stem(word: string): string {
  if (word.length > 5 && word.endsWith("ing")) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith("ies")) return `${word.slice(0, -3)}y`;
  if (word.length > 4 && word.endsWith("ed")) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith("s") && !word.endsWith("ss")) return word.slice(0, -1);
  return word;
}

export function isValueToken(word: string): boolean {
  return /\d/.test(word) || VALUE_WORDS.has(word);
}

export interface TextFeatures {
  /** Stemmed content words. */
  words: Set<string>;
  /** Content words written as a name or identifier somewhere in the text (Stripe, STRIPE_KEY, api.v2). */
  entities: Set<string>;
  negated: boolean;
  /** key → value, from sentences like "the request timeout is 30 seconds". */
  settings: Map<string, string>;
}

const SETTING_RE = /^(.*?)\b(?:is|are|=|:|equals|set to|should be|must be|defaults to|default is|runs on|uses)\s+(.+)$/i;

/**
 * A word the checks read: two characters or more, or a digit. Dropped with the one-letter words, a
 * one-digit value ("starts at 2 am" / "at 4 am", "5 attempts" / "10 attempts") left the two texts the
 * same words, and the pair was merged as a near-duplicate, the older archived, not flagged for review.
 */
function longEnough(word: string): boolean {
  return word.length >= 2 || /\d/.test(word);
}

export function textFeatures(text: string): TextFeatures {
  const words = new Set<string>();
  const entities = new Set<string>();
  let negated = false;
  const sentences = text.slice(0, 8000).split(/(?<=[.!?])\s+|\n+/);
  const settings = new Map<string, string>();
  for (const sentence of sentences) {
    if (NEGATION_RE.test(sentence)) negated = true;
    const tokens = sentence.match(TOKEN_RE) ?? [];
    tokens.forEach((raw, index) => {
      const lower = raw.toLowerCase();
      if (STOPWORDS.has(lower) || !longEnough(lower)) return;
      const word = stem(lower);
      words.add(word);
      const named = (index > 0 && /^[A-Z][a-z]/.test(raw)) || /^[A-Z0-9_]{2,}$/.test(raw) && /[A-Z]/.test(raw) || /[a-z][A-Z]|_|\.[a-z]/.test(raw);
      if (named && !isValueToken(lower)) entities.add(word);
    });
    const match = sentence.match(SETTING_RE);
    if (match) {
      const key = contentWords(match[1]!).slice(-3).join(" ");
      // The value keeps its words as written: it is shown to the owner in the review.
      const value = contentWords(match[2]!, false).join(" ");
      if (key && value && key.length >= 3) settings.set(key, value);
    }
  }
  return { words, entities, negated, settings };
}

function contentWords(text: string, stemmed = true): string[] {
  const words = (text.match(TOKEN_RE) ?? []).map((t) => t.toLowerCase()).filter((t) => !STOPWORDS.has(t) && longEnough(t));
  return stemmed ? words.map(stem) : words;
}

export function jaccard(a: Set<string>, b: Set<string>): number {
  let shared = 0;
  for (const word of a) if (b.has(word)) shared++;
  const union = a.size + b.size - shared;
  return union === 0 ? 0 : shared / union;
}
