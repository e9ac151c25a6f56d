import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// JSON-RPC 2.0 (§6) answers a batch with an array, whatever the number of requests in it. The SDK's
// JSON transport answered a batch holding one request with that response alone, an object a client
// matching the answer to its batch could not read.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

async function post(body: unknown) {
  const req = new Request("http://engram.test/mcp", {
    method: "POST",
    headers: {
      authorization: `Bearer ${ann.key}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
    },
    body: JSON.stringify(body),
  });
  const res = await mcpPost(req, { params: Promise.resolve({}) });
  return { status: res.status, type: res.headers.get("content-type"), limit: res.headers.get("x-ratelimit-limit"), body: (await res.json()) as any };
}

const hubsCall = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_hubs", arguments: {} } });

describe("a JSON-RPC batch", () => {
  it("holding one request is answered with an array of one response", async () => {
    const res = await post([hubsCall(7)]);
    expect(res.status).toBe(200);
    expect(res.type).toContain("application/json");
    expect(Array.isArray(res.body)).toBe(true);
    expect(res.body).toHaveLength(1);
    expect(res.body[0]).toMatchObject({ jsonrpc: "2.0", id: 7, result: { structuredContent: { hubs: expect.any(Array) } } });
    // The rate-limit headers stay on the rewrapped answer.
    expect(res.limit).not.toBeNull();
  });

  it("holding one request and a notification is answered with an array of the one response", async () => {
    const res = await post([hubsCall(8), { jsonrpc: "2.0", method: "notifications/initialized" }]);
    expect(res.status).toBe(200);
    expect(res.body).toEqual([expect.objectContaining({ id: 8 })]);
  });

  it("holding two requests is answered with both, and a single request (no batch) with an object", async () => {
    const both = await post([hubsCall(9), hubsCall(10)]);
    expect(both.body.map((r: { id: number }) => r.id).sort((a: number, b: number) => a - b)).toEqual([9, 10]);
    const single = await post(hubsCall(11));
    expect(Array.isArray(single.body)).toBe(false);
    expect(single.body).toMatchObject({ id: 11 });
  });
});
