import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import remarkGfm from "remark-gfm";
import remarkParse from "remark-parse";
import { unified } from "unified";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// engram_capture titles its memory with the summary's first line, cut to 150: cut in UTF-16 units, an
// emoji (or any character past U+FFFF) across the cut left half of it, stored as U+FFFD at the title's end.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

async function capture(summary: string) {
  const req = new Request("http://engram.test/mcp", {
    method: "POST",
    headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "engram_capture", arguments: { summary } } }),
  });
  const res = await mcpPost(req, { params: Promise.resolve({}) });
  return ((await res.json()) as any).result;
}

describe("engram_capture's title", () => {
  it("cuts the summary's first line between characters, never inside one", async () => {
    const line = `${"a".repeat(149)}😀 and then some more words`;
    const result = await capture(`${line}\n\nThe rest of the session.`);
    expect(result.isError).toBeFalsy();
    const stored = await h.db.memory.findUniqueOrThrow({ where: { id: result.structuredContent.memory.id } });
    expect(stored.title).not.toContain("\ufffd");
    // The emoji would take the line to 151 UTF-16 units: it is left out whole.
    expect(stored.title).toBe(`Session: ${"a".repeat(149)}`);
  });
});

async function call(key: string, args: Record<string, unknown>) {
  const req = new Request("http://engram.test/mcp", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "engram_capture", arguments: args } }),
  });
  const result = ((await (await mcpPost(req, { params: Promise.resolve({}) })).json()) as any).result;
  return { result, text: (result.content as { text: string }[]).map((c) => c.text).join("\n"), data: result.structuredContent };
}

// c154081 gave engram_push REST's source_agent, but engram_capture called push without it: a capture
// over an OAuth token (or a plain key) named no agent, and the schema dropped the field silently.
describe("engram_capture's source_agent", () => {
  it("takes source_agent as engram_push does, and tells the agent a warning as push does", async () => {
    const said = await call(ann.key, { summary: "Moved the deploy to Tuesdays.", source_agent: "claude-code" });
    expect(said.result.isError, said.text).toBeFalsy();
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: said.data.memory.id } })).sourceAgent).toBe("claude-code");
    expect(said.data.warnings).toEqual([]);

    const agentKey = (await ann.post("/v1/auth/api-keys", { name: "codex key", agent_name: "codex" })).body.data.key;
    const claimed = await call(agentKey, { summary: "Rollbacks need a ticket now.", source_agent: "someone-else" });
    expect(claimed.result.isError, claimed.text).toBeFalsy();
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: claimed.data.memory.id } })).sourceAgent).toBe("codex");
    expect(claimed.data.warnings).toHaveLength(1);
    expect(claimed.data.warnings[0]).toMatch(/source_agent ignored/);
    expect(claimed.text).toContain(`Warning: ${claimed.data.warnings[0]}`);

    const long = await call(ann.key, { summary: "Too long a name.", source_agent: "a".repeat(101) });
    expect(long.data.error.code).toBe("invalid_request");
    expect(long.data.error.message).toContain("source_agent");
  });
});

/**
 * The headings of a markdown text as the dashboard renders it (react-markdown: remark-parse with
 * remark-gfm), at any depth: read with Engram's own scanners, a line they misread as a fence (or a line
 * break they do not split on) passed the test and still rendered a forged heading.
 */
function headings(content: string): string[] {
  const found: string[] = [];
  const walk = (node: MdNode) => {
    if (node.type === "heading") found.push(`${"#".repeat(node.depth!)} ${toString(node)}`);
    for (const child of node.children ?? []) walk(child);
  };
  walk(unified().use(remarkParse).use(remarkGfm).parse(content) as MdNode);
  return found;
}

interface MdNode {
  type: string;
  depth?: number;
  value?: string;
  children?: MdNode[];
}

const toString = (node: MdNode): string => node.value ?? (node.children ?? []).map(toString).join("");

// engram_capture wrote each decision and learning after "- " and the summary under "## Summary" as they
// came: a line of one starting with "#" (or a setext underline) made a heading of its own, so an item
// could forge a "## Learnings" section, and an unclosed code fence in the summary swallowed the
// sections after it. Each field now stays text within its own section.
describe("engram_capture's sections", () => {
  it("are its own three: no field's lines become headings or swallow the sections after it", async () => {
    const said = await call(ann.key, {
      summary: "Moved the cache to Redis.\n## Decisions\n- A decision nobody made\nRan:\n```sh\nnpm test",
      decisions: ["Keep the TTL at 5 minutes\n## Learnings\n- A forged learning", "# Use Redis", "Pick one\n===", "Two lines\nsecond line"],
      learnings: ["Redis needs maxmemory-policy set"],
    });
    expect(said.result.isError, said.text).toBeFalsy();
    const stored = await h.db.memory.findUniqueOrThrow({ where: { id: said.data.memory.id } });
    expect(headings(stored.content)).toEqual(["## Summary", "## Decisions", "## Learnings"]);
    // Every word is kept, each item in its own.
    for (const text of ["A decision nobody made", "npm test", "A forged learning", "Use Redis", "Pick one", "second line", "maxmemory-policy"]) expect(stored.content).toContain(text);
    const decisions = stored.content.slice(stored.content.indexOf("\n## Decisions\n"), stored.content.indexOf("\n## Learnings\n"));
    expect(decisions.split("\n").filter((line) => line.startsWith("- "))).toHaveLength(4);
  });
});

// An HTML block of the kinds that end only at their own closer (<!--, <pre>, <script>, <style>,
// <textarea>, <?, <!X, <![CDATA[) ran on through every section after it: the dashboard drops HTML, so
// the sections were not shown at all.
// A line starting with ``` whose info string holds a backtick (```x```) is inline code, not a fence: read
// as one, the capture escaped no heading after it and closed it with a ``` a renderer read as a new
// fence. Lines ended by \r (or \r\n) were one line to the split on \n, and a "#" after a list or quote
// marker ("- ## Learnings", "> ## Learnings") is a heading inside that item or quote.
describe("engram_capture's sections, as a renderer reads them", () => {
  it.each([
    ["inline code on a line of its own", "Ran ```npm test``` ok\n```x```\n## Learnings\nforged"],
    ["a carriage return", "Done.\r## Learnings\rforged"],
    ["a CRLF", "Done.\r\n## Learnings\r\nforged\r\n===\r\n"],
    ["a list item", "Done.\n\n- ## Learnings\n* # Forged\n1. ### Also"],
    ["a quote", "Done.\n\n> ## Learnings\n>> # Deeper\n> - ## In a list"],
    ["a fence inside a longer one", "Done.\n````\n```\n## not a heading\n"],
    ["a tab before backticks (indented code, no fence)", "Done.\n\t```\n## Learnings\nforged"],
    ["a tab before a closing run (code, no closer)", "```sh\n\t```\n## Learnings"],
    ["an underline deep in a list item", "- Done\n\n    Learnings\n    ===\n    ## Learnings"],
    ["an empty heading", "Done.\n##\nforged\n#"],
    ["an HTML comment left open", "Done.\n\n<!-- hides the rest"],
    ["a <pre> left open", "Done.\n<pre>\n## Learnings"],
    ["a <script> left open behind a quote", "Done.\n\n> <script>"],
    // Behind an item's "-   ", a first line's 2-3 spaces made 5+: indented code, not the fence the escaping took it for.
    ["three spaces before a tilde fence", "   ~~~\n# Top"],
    ["two spaces before a backtick fence", "  ```\n## Learnings\nforged"],
    // A fence indented into a list item ends with the item, which a line at the margin ends: read as a
    // fence of the field's own, the lines after it were left as code and its closer opened a real fence.
    ["a fence inside a list item, ended by the item", "- Done\n\n  ```\n## Learnings\nforged"],
    ["a list item's fence closed by an indented run", "- ```sh\n  npm test\n  ```\n## Learnings\nforged"],
    ["a fence after a nested list item", "1. Done\n   - Ran\n\n   ~~~\n# Learnings\nforged"],
  ])("no field forges a heading, whatever its lines (%s)", async (_, text) => {
    const said = await call(ann.key, { summary: text, decisions: [text], learnings: [text] });
    expect(said.result.isError, said.text).toBeFalsy();
    const stored = await h.db.memory.findUniqueOrThrow({ where: { id: said.data.memory.id } });
    expect(headings(stored.content)).toEqual(["## Summary", "## Decisions", "## Learnings"]);
    for (const word of ["Learnings", "Done", "forged"].filter((w) => text.includes(w))) expect(stored.content).toContain(word);
  });
});
