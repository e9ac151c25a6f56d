import { describe, expect, it } from "vitest";
import { setDatabase } from "@/lib/db/database.ts";
import { MAX_TOOL_CALLS_AT_ONCE } from "@/lib/mcp/serve-mcp.ts";
import { openMcpToolCalls, postMcp } from "./support/mcp-tool-calls.ts";

// The SDK starts every call of a JSON-RPC batch at once: a batch of 100 engram_get calls made 100 page
// reads at once and could hold up to 100 pool connections, only its response being bounded. A request's
// tool calls now run at most MAX_TOOL_CALLS_AT_ONCE at a time, answered as before and in the batch's order.

const mcp = openMcpToolCalls("/mcp");

describe("a batch's tool calls", () => {
  it("run a few at a time, each answered in the batch's order", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push((await mcp.ann.post("/v1/memories", { content: `Note number ${i} of the batch.` })).body.data.id);
    let inFlight = 0;
    let most = 0;
    // Observes every memory read: how many tool calls are reading at the same time.
    const db = mcp.h.database.prisma.$extends({
      query: {
        memory: {
          async $allOperations({ args, query }) {
            inFlight += 1;
            most = Math.max(most, inFlight);
            try {
              await new Promise((resolve) => setTimeout(resolve, 20));
              return await query(args);
            } finally {
              inFlight -= 1;
            }
          },
        },
      },
    });
    setDatabase({ ...mcp.h.database, prisma: db as unknown as typeof mcp.h.database.prisma });
    let answers: any[];
    try {
      const req = new Request("http://engram.test/mcp", {
        method: "POST",
        headers: { authorization: `Bearer ${mcp.ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
        body: JSON.stringify(ids.map((id, i) => ({ jsonrpc: "2.0", id: i + 1, method: "tools/call", params: { name: "engram_get", arguments: { id } } }))),
      });
      const res = await postMcp("/mcp", req);
      expect(res.status).toBe(200);
      answers = (await res.json()) as any[];
    } finally {
      setDatabase(mcp.h.database);
    }
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(MAX_TOOL_CALLS_AT_ONCE);
    expect(answers.map((a) => a.id)).toEqual(ids.map((_, i) => i + 1));
    for (const [i, answer] of answers.entries()) {
      expect(answer.result.isError, JSON.stringify(answer.result.structuredContent)).toBeFalsy();
      expect(answer.result.structuredContent.memory).toMatchObject({ id: ids[i], content: `Note number ${i} of the batch.` });
    }
  }, 60_000);
});
