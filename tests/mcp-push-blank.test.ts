import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// engram_push refuses content of white space alone as REST's create does (400 invalid_request on
// content): it would save a memory of nothing titled "Untitled".

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

async function push(id: number, content: string) {
  const req = new Request("http://engram.test/mcp", {
    method: "POST",
    headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_push", arguments: { content } } }),
  });
  const res = await mcpPost(req, { params: Promise.resolve({}) });
  return { status: res.status, body: (await res.json()) as any };
}

describe("engram_push content", () => {
  it("white space alone is an invalid_request tool error on content, and nothing is written", async () => {
    const before = await h.db.memory.count({ where: { hubId: ann.personalHubId } });
    for (const [i, content] of [" ", "\n\t  \n", "\u00a0\u2003"].entries()) {
      const res = await push(i + 1, content);
      expect(res.status, JSON.stringify(content)).toBe(200);
      const result = res.body.result;
      expect(result.isError, JSON.stringify(content)).toBe(true);
      expect(result.structuredContent.error).toMatchObject({ code: "invalid_request", message: expect.stringContaining("content") });
    }
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(before);
    const fine = await push(9, "  A real note  ");
    expect(fine.body.result.isError).toBeFalsy();
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(before + 1);
  });
});
