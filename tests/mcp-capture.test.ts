import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
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
