import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { POST as chatgptPost } from "@/app/mcp/chatgpt/route.ts";
import { createHarness, frozenLimiter, HARNESS_LIMITS, type Client, type Harness } from "./support/harness.ts";

// The heavy tools (recall and ask) were one list for both endpoints: `search` and `ask` called on /mcp,
// where no such tools exist, or engram_recall (memax_recall) on /mcp/chatgpt, spent a heavy token for a
// "tool not found" answer, and a client could spend the recall budget without recalling anything.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterEach(() => setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS })));
afterAll(async () => {
  await h.close();
});

async function call(endpoint: "/mcp" | "/mcp/chatgpt", name: string, args: Record<string, unknown>) {
  const req = new Request(`http://engram.test${endpoint}`, {
    method: "POST",
    headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  const res = await (endpoint === "/mcp" ? mcpPost : chatgptPost)(req, { params: Promise.resolve({}) });
  return { status: res.status, body: (await res.json()) as any };
}

describe("the heavy bucket", () => {
  it("is charged only for the recall and ask tools the endpoint serves", async () => {
    setRateLimiter(frozenLimiter({ regular: 100, heavy: 1, light: 100 }));
    for (const [endpoint, name] of [["/mcp", "search"], ["/mcp", "ask"], ["/mcp/chatgpt", "engram_recall"], ["/mcp/chatgpt", "memax_ask"], ["/mcp", "search"]] as const) {
      const res = await call(endpoint, name, { query: "anything" });
      // Not a tool of this endpoint: answered as such, charged as any other call (one regular token).
      expect([endpoint, name, res.status]).toEqual([endpoint, name, 200]);
      expect(JSON.stringify(res.body)).toMatch(/not found/i);
    }
    // The one heavy token is still there for a real recall, and spent by it.
    const recall = await call("/mcp", "engram_recall", { query: "anything" });
    expect(recall.status).toBe(200);
    expect(recall.body.result.isError).toBeFalsy();
    expect((await call("/mcp/chatgpt", "search", { query: "anything" })).status).toBe(429);
  });
});
