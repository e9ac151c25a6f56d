import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { captureFacts, MAX_CAPTURE_FACTS } from "@/lib/memories/extract-capture-facts.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Memax's memax_capture pushes one session summary (source "mcp/capture") and tells the agent each
// decision and learning "is extracted and stored as a separate searchable memory".

// The content Memax's CLI builds (packages/cli/src/commands/mcp.ts, memax_capture).
const CAPTURE = [
  "## Session Summary",
  "Moved the page cache to Redis",
  "",
  "## Decisions Made",
  "- Chose Redis over Memcached for persistence",
  "- Keep the TTL at 5 minutes",
  "  so product pages stay fresh",
  "",
  "## Learnings",
  "- Redis needs maxmemory-policy set before it fills up",
  "",
].join("\n");

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  await h?.close();
});

async function facts(captureId: string) {
  const rows = await h.db.memory.findMany({ where: { sourcePath: { startsWith: `captures/${captureId}/` } }, orderBy: { sourcePath: "asc" } });
  return rows;
}

describe("captureFacts", () => {
  it("takes the items under decision and learning headings, continuation lines included, and the summary's first line", () => {
    expect(captureFacts(CAPTURE)).toEqual({
      summary: "Moved the page cache to Redis",
      facts: [
        { text: "Chose Redis over Memcached for persistence", kind: "rationale", tag: "decision" },
        { text: "Keep the TTL at 5 minutes so product pages stay fresh", kind: "rationale", tag: "decision" },
        { text: "Redis needs maxmemory-policy set before it fills up", kind: "semantic", tag: "learning" },
      ],
    });
    expect(captureFacts("## Notes\n- not a decision\n\n## Key Decisions\n1. numbered counts too").facts).toEqual([{ text: "numbered counts too", kind: "rationale", tag: "decision" }]);
    const many = `## Decisions\n${Array.from({ length: 30 }, (_, i) => `- decision ${i}`).join("\n")}`;
    expect(captureFacts(many).facts).toHaveLength(MAX_CAPTURE_FACTS);
  });

  it("reads headings and items with a long run of spaces and a lone carriage return in linear time (ReDoS)", () => {
    // Both regexes tried every split of the leading spaces against the rest of the line: minutes for this capture.
    const run = " ".repeat(100_000);
    const long = "x".repeat(100_000);
    const capture = `##${run}${long}\rDecisions\n## Decisions\n-${run}${long}\rnext\n- Use Redis  \r\n2) Keep TTL at 5 min\n- \n    - too deep`;
    const started = performance.now();
    const { facts } = captureFacts(capture);
    expect(performance.now() - started).toBeLessThan(3_000);
    // A carriage return inside the text is no heading or item; one at the end is trailing space; four
    // spaces of indent continue the item above.
    expect(facts).toEqual([
      { text: "Use Redis", kind: "rationale", tag: "decision" },
      { text: "Keep TTL at 5 min - too deep", kind: "rationale", tag: "decision" },
    ]);
  });
});

describe("POST /v1/memories with source mcp/capture", () => {
  it("keeps the capture and adds one memory per decision and learning, once", async () => {
    const res = await ann.post("/v1/memories", { content: CAPTURE, title: "Session capture — 11/27/2026", content_type: "transcript", source: "mcp/capture", source_agent: "claude-code" });
    expect(res.status).toBe(201);
    const id = res.body.data.id as string;
    const rows = await facts(id);
    expect(rows.map((r) => [r.sourcePath, r.kind, r.tags, r.source, r.sourceAgent])).toEqual([
      [`captures/${id}/decision-1`, "rationale", ["session-capture", "decision"], "extraction", "claude-code"],
      [`captures/${id}/decision-2`, "rationale", ["session-capture", "decision"], "extraction", "claude-code"],
      [`captures/${id}/learning-3`, "semantic", ["session-capture", "learning"], "extraction", "claude-code"],
    ]);
    expect(rows[0]!.title).toBe("Chose Redis over Memcached for persistence");
    expect(rows[0]!.content).toContain("From the session “Moved the page cache to Redis”");
    expect(rows.every((r) => r.hubId === ann.personalHubId)).toBe(true);
    // The same capture again is the same memory: nothing is added.
    const again = await ann.post("/v1/memories", { content: CAPTURE, source: "mcp/capture" });
    expect(again.status).toBe(200);
    expect(await h.db.memory.count({ where: { source: "extraction", hubId: ann.personalHubId } })).toBe(3);
  });

  it("leaves other pushes alone, Engram's own engram_capture included (it says one memory)", async () => {
    const res = await ann.post("/v1/memories", { content: CAPTURE.replace("Redis", "Valkey"), source: "mcp" });
    expect(res.status).toBe(201);
    expect(await facts(res.body.data.id)).toEqual([]);
  });

  it("saves the capture even when its facts do not fit the quota", async () => {
    const bob = await h.user("Bob");
    process.env.ENGRAM_QUOTA_HUB_MEMORIES = String((await h.db.memory.count({ where: { hubId: bob.personalHubId } })) + 1);
    try {
      const res = await bob.post("/v1/memories", { content: CAPTURE, source: "mcp/capture" });
      expect(res.status).toBe(201);
      expect(await facts(res.body.data.id)).toEqual([]);
    } finally {
      delete process.env.ENGRAM_QUOTA_HUB_MEMORIES;
    }
  });
});
