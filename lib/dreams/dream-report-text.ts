import type { DreamAction } from "@/lib/db/generated/client.ts";

/** Lines listed per section of the report; the actions list has them all. */
const SECTION_LINES = 20;

export function countActions(actions: Pick<DreamAction, "actionType" | "toTopicId" | "createdTopic">[]) {
  const count = (type: string) => actions.filter((a) => a.actionType === type).length;
  return {
    merged: count("merge"),
    contradictions: count("contradiction"),
    archived: count("archive"),
    organized: count("organize"),
    topicsCreated: actions.filter((a) => a.actionType === "organize" && a.createdTopic).length,
  };
}

/** The run's markdown report; its first line is the one-line summary the CLI prints. */
export function buildDreamReport(input: { hubName: string; scanned: number; durationMs: number; actions: DreamAction[]; timedOut: boolean }): string {
  const c = countActions(input.actions);
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
  const section = (title: string, type: string, line: (a: DreamAction) => string) => {
    const items = input.actions.filter((a) => a.actionType === type);
    if (items.length === 0) return;
    lines.push("", `## ${title} (${items.length})`, "");
    for (const a of items.slice(0, SECTION_LINES)) lines.push(`- ${line(a)}`);
    if (items.length > SECTION_LINES) lines.push(`- … and ${items.length - SECTION_LINES} more`);
  };
  section("Merged near-duplicates", "merge", (a) => `${a.reason}; the older one is archived (undo to restore it)`);
  section("Contradictions to review", "contradiction", (a) => `${a.reason} — keep A, keep B or keep both`);
  section("Archived as stale", "archive", (a) => a.reason);
  section("Organized into topics", "organize", (a) => `${(a.details as { topic_name?: string }).topic_name ?? "topic"}: ${a.reason}`);
  return lines.join("\n");
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
