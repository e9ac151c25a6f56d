import type { Kind, Stability } from "@/lib/memories/memory-fields.ts";
import { RUN_START } from "./line-start.ts";

interface Signals {
  text: string;
  contentType: string;
}

// `^\s*(\d+[.)]|step \d+)\s+` and `^\s*(\$|npm|…)\s` (flag m) without their quadratic rescans of blank lines.
const NUMBERED_STEP = new RegExp(String.raw`${RUN_START}\s*(\d+[.)]|step \d+)\s+`, "g");
const COMMAND_LINE = new RegExp(String.raw`${RUN_START}\s*(\$|npm|npx|pnpm|yarn|pip|git|docker|kubectl|curl|make|cargo|go)\s`, "g");

const count = (text: string, pattern: RegExp) => text.match(pattern)?.length ?? 0;

/**
 * Deterministic, local guess of `kind`: cue phrases scored per kind, the hint
 * weighing triple. Cheap enough to run inline at create, so a memory never
 * lacks a kind; a configured chat model may refine it in the background.
 */
export function classifyKind(content: string, contentType: string, hint?: string | null): Kind {
  const scores = scoreKinds({ text: content.slice(0, 20_000).toLowerCase(), contentType });
  if (hint) {
    const hinted = scoreKinds({ text: hint.toLowerCase(), contentType });
    for (const kind of Object.keys(scores) as Kind[]) scores[kind] += hinted[kind] * 3;
  }
  let best: Kind = "semantic";
  for (const kind of ["procedural", "rationale", "episodic"] as const) if (scores[kind] > scores[best]) best = kind;
  return best;
}

function scoreKinds({ text, contentType }: Signals): Record<Kind, number> {
  const scores: Record<Kind, number> = { semantic: 1, procedural: 0, rationale: 0, episodic: 0 };
  scores.procedural +=
    count(text, NUMBERED_STEP) * 0.8 +
    count(text, /\b(how to|to do this|run|install|deploy|configure|set up|setup|execute|click|open|navigate|first,|then|finally|next,|make sure)\b/g) * 0.5 +
    count(text, COMMAND_LINE) * 0.8 +
    (/\b(runbook|playbook|procedure|instructions|checklist|guide|recipe)\b/.test(text) ? 2 : 0);
  scores.rationale +=
    count(text, /\b(because|decided|decision|we chose|chose|rationale|trade-?offs?|instead of|rather than|pros|cons|why we|the reason|so that|adr)\b/g) * 0.7 +
    (/\b(architecture decision|decision record|we decided)\b/.test(text) ? 2 : 0);
  scores.episodic +=
    count(text, /\b(today|yesterday|this morning|last (week|night|month)|meeting|standup|incident|outage|happened|we (did|shipped|released|fixed|met|discussed)|postmortem|retro)\b/g) * 0.7 +
    count(text, /\b(20\d\d-\d\d-\d\d|(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]* \d{1,2})\b/g) * 0.4 +
    (contentType === "chat" || contentType === "transcript" ? 3 : 0);
  if (contentType === "code") scores.semantic += 1;
  return scores;
}

/** How long the memory is likely to stay true. */
export function classifyStability(content: string, kind: string, contentType: string, hint?: string | null): Stability {
  const text = `${hint ?? ""}\n${content.slice(0, 20_000)}`.toLowerCase();
  const volatile = count(text, /\b(todo|wip|for now|temporar(y|ily)|currently|right now|this week|today|until|workaround|hack|draft|tbd)\b/g);
  const stable = count(text, /\b(always|never|policy|principle|standard|convention|must|invariant|decided|definition|by design)\b/g);
  if (contentType === "chat" || contentType === "transcript") return volatile > stable + 1 ? "volatile" : "evolving";
  if (volatile >= 2 && volatile > stable) return "volatile";
  if (kind === "episodic") return volatile > 0 ? "volatile" : "evolving";
  if (kind === "rationale" || stable >= 2) return "stable";
  return "evolving";
}
