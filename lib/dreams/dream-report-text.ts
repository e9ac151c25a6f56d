import type { DreamAction } from "@/lib/db/generated/client.ts";
import type { RunCounts } from "./serialize-dream.ts";

/** Lines listed per section of the report; the actions list has them all. */
export const SECTION_LINES = 20;

/**
 * The run's markdown report; its first line is the one-line summary the CLI prints. `counts` are the
 * run's (every action), `listed` the first SECTION_LINES actions of each type.
 */
export function buildDreamReport(input: { hubName: string; scanned: number; durationMs: number; counts: RunCounts; listed: DreamAction[]; timedOut: boolean }): string {
  const c = input.counts;
  const parts = [
    c.merged && `merged ${c.merged} near-duplicate${c.merged === 1 ? "" : "s"}`,
    c.contradictions && `flagged ${c.contradictions} contradiction${c.contradictions === 1 ? "" : "s"} for review`,
    c.archived && `archived ${c.archived} stale memor${c.archived === 1 ? "y" : "ies"}`,
    c.organized && `organized ${c.organized} memor${c.organized === 1 ? "y" : "ies"}${c.topicsCreated ? ` (${c.topicsCreated} new topic${c.topicsCreated === 1 ? "" : "s"})` : ""}`,
  ].filter(Boolean);
  const summary = parts.length ? `${capitalize(parts.join(", "))}.` : "Nothing to tidy: no duplicates, contradictions, stale or unsorted memories.";
  const lines = [
    summary,
    "",
    `# Dream report — ${input.hubName}`,
    "",
    `Scanned ${input.scanned} memories in ${(input.durationMs / 1000).toFixed(1)} s.${input.timedOut ? " The run reached its time budget; the next run continues where it stopped." : ""}`,
  ];
  const section = (title: string, type: string, total: number, line: (a: DreamAction) => string) => {
    if (total === 0) return;
    const items = input.listed.filter((a) => a.actionType === type).slice(0, SECTION_LINES);
    lines.push("", `## ${title} (${total})`, "");
    for (const a of items) lines.push(`- ${line(a)}`);
    if (total > items.length) lines.push(`- … and ${total - items.length} more`);
  };
  section("Merged near-duplicates", "merge", c.merged, (a) => `${a.reason}; the older one is archived (undo to restore it)`);
  section("Contradictions to review", "contradiction", c.contradictions, (a) => `${a.reason} — keep A, keep B or keep both`);
  section("Archived as stale", "archive", c.archived, (a) => a.reason);
  section("Organized into topics", "organize", c.organized, (a) => `${(a.details as { topic_name?: string }).topic_name ?? "topic"}: ${a.reason}`);
  return lines.join("\n");
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
