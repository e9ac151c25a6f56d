import type { HubContext } from "@/lib/api/context.ts";
import { createMemory } from "./create-memory.ts";
import { createMemoryBodySchema } from "./memory-fields.ts";
import type { Memory } from "@/lib/db/generated/client.ts";
import { atxHeading } from "@/lib/processing/markdown-lines.ts";

/** What Memax's CLI pushes for its `memax_capture` tool (Engram's own engram_capture keeps one memory, as it says). */
export const CAPTURE_SOURCE = "mcp/capture";
/** Facts one capture may add; the rest stay readable in the capture itself. */
export const MAX_CAPTURE_FACTS = 20;
const MAX_FACT_CHARS = 2000;

const SECTIONS = [
  { heading: /decision/i, kind: "rationale", tag: "decision" },
  { heading: /learn|lesson/i, kind: "semantic", tag: "learning" },
] as const;

export interface CaptureFact {
  text: string;
  kind: (typeof SECTIONS)[number]["kind"];
  tag: (typeof SECTIONS)[number]["tag"];
}

/**
 * The capture's decisions and learnings: the list items under headings that name them (Memax's
 * "## Decisions Made" and "## Learnings"), an indented line continuing its item. Also the first
 * line of its summary section, which gives each fact its context.
 */
export function captureFacts(content: string): { summary: string; facts: CaptureFact[] } {
  let section: (typeof SECTIONS)[number] | "summary" | undefined;
  let summary = "";
  const facts: CaptureFact[] = [];
  for (const line of content.split("\n")) {
    const heading = atxHeading(line)?.text;
    if (heading !== undefined) {
      section = /summary/i.test(heading) ? "summary" : SECTIONS.find((s) => s.heading.test(heading));
      continue;
    }
    if (section === "summary") {
      if (!summary && line.trim()) summary = line.trim();
      continue;
    }
    if (!section) continue;
    const item = itemText(line);
    if (item !== undefined) facts.push({ text: item, kind: section.kind, tag: section.tag });
    else if (/^\s+\S/.test(line) && facts.length) facts[facts.length - 1]!.text += ` ${line.trim()}`;
  }
  return { summary, facts: facts.slice(0, MAX_CAPTURE_FACTS).map((f) => ({ ...f, text: f.text.slice(0, MAX_FACT_CHARS) })) };
}

/*
 * A list item's text, as `^\s{0,3}(?:[-*+]|\d+[.)])\s+(.*\S)\s*$` reads it. Found by scanning: on a
 * line with a lone carriage return that regex retried every split of the leading spaces against the
 * rest of the line, quadratic in the line's length.
 */
const isSpace = (ch: string | undefined) => ch !== undefined && /\s/.test(ch);
const hasLineBreak = (text: string) => /[\r\u2028\u2029]/.test(text); // `.` matches none of them; \n cannot occur

function itemText(line: string): string | undefined {
  let i = 0;
  while (i < 3 && isSpace(line[i])) i++;
  if (line[i] === "-" || line[i] === "*" || line[i] === "+") i++;
  else {
    const digits = i;
    while (line[i]! >= "0" && line[i]! <= "9") i++;
    if (i === digits || (line[i] !== "." && line[i] !== ")")) return undefined;
    i++;
  }
  if (!isSpace(line[i])) return undefined;
  while (isSpace(line[i])) i++;
  let end = line.length;
  while (end > i && isSpace(line[end - 1])) end--;
  const text = line.slice(i, end);
  return text && !hasLineBreak(text) ? text : undefined;
}

/**
 * Memax's capture tool tells the agent that each fact "is extracted and stored as a separate
 * searchable memory". Engram does that without a model: each decision and learning of a new
 * capture becomes a memory of the capture's hub, at a source_path of its own (a retry updates
 * instead of duplicating). Best effort: the capture is already saved, so a fact that cannot be
 * written (a full quota) is logged and skipped.
 */
export async function extractCaptureFacts(ctx: HubContext, capture: Pick<Memory, "id" | "content" | "sourceAgent" | "createdAt">): Promise<number> {
  const { summary, facts } = captureFacts(capture.content);
  const day = capture.createdAt.toISOString().slice(0, 10);
  const context = summary ? `From the session “${summary}” (${day}).` : `From a session capture (${day}).`;
  let written = 0;
  for (const [i, fact] of facts.entries()) {
    try {
      await createMemory(
        ctx,
        createMemoryBodySchema.parse({
          content: `${fact.text}\n\n${context}`,
          kind: fact.kind,
          tags: ["session-capture", fact.tag],
          source: "extraction",
          source_agent: capture.sourceAgent ?? undefined,
          initiation_type: "agent_automatic",
          source_path: `captures/${capture.id}/${fact.tag}-${i + 1}`,
        }),
      );
      written += 1;
    } catch (error) {
      console.warn(`[engram] capture ${capture.id}: fact ${i + 1} not saved: ${(error as Error).message}`);
    }
  }
  return written;
}
