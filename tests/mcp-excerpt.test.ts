import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Tool texts quote a memory's summary (200 characters) and a recalled chunk (600) cut short. Cut in UTF-16
// units, an emoji across the cut left a lone surrogate in the text: JSON.stringify writes it as "\ud83d",
// which strict JSON parsers (Rust's serde_json, as in Codex) refuse, failing the whole response.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

describe("a tool text quoting a long summary", () => {
  it("cuts it between characters, leaving no half of an emoji", async () => {
    const id = (await ann.post("/v1/memories", { content: "A memory whose summary is long." })).body.data.id as string;
    // The summary as processing would have written it: 199 characters, then an emoji across the 200th.
    await h.db.memory.update({ where: { id }, data: { summary: `${"s".repeat(199)}😀 and more after the cut` } });
    const req = new Request("http://engram.test/mcp", {
      method: "POST",
      headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "engram_list", arguments: {} } }),
    });
    const raw = await (await mcpPost(req, { params: Promise.resolve({}) })).text();
    expect(raw).not.toMatch(/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/i);
    const text = (JSON.parse(raw) as any).result.content[0].text as string;
    expect(text).toContain("s".repeat(199));
    expect(text).not.toMatch(LONE_SURROGATE);
  });
});
