import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { POST as chatgptPost } from "@/app/mcp/chatgpt/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

/**
 * Tool arguments nested absurdly deep, sent straight to the route handlers: JSON.parse reads any
 * depth, but the SDK's validation and our walks recurse. Each must get a clean answer, never a 500.
 */
let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h.close());

const DEPTH = 10_000;
const arrays = "[".repeat(DEPTH) + "]".repeat(DEPTH);
const objects = '{"a":'.repeat(DEPTH) + "1" + "}".repeat(DEPTH);

async function post(body: string, options: { path?: string; version?: string } = {}) {
  const path = options.path ?? "/mcp";
  const req = new Request(`http://engram.test${path}`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${ann.key}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(options.version && { "mcp-protocol-version": options.version }),
    },
    body,
  });
  const res = path === "/mcp" ? await mcpPost(req, { params: Promise.resolve({}) }) : await chatgptPost(req, { params: Promise.resolve({}) });
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) as any };
}

const call = (name: string, args: string, id = 1) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"${name}","arguments":${args}}}`;

/** A clean JSON-RPC answer: a result (a tool error included) or a request error, nothing of the overflow in it. */
function expectClean(res: { status: number; text: string; body: any }) {
  expect([200, 400], res.text.slice(0, 300)).toContain(res.status);
  expect(res.body.jsonrpc).toBe("2.0");
  if (res.body.error) expect([-32600, -32602]).toContain(res.body.error.code);
  else expect(res.body.result).toBeDefined();
  expect(res.text).not.toMatch(/call stack|RangeError|Internal error/i);
}

describe("deeply nested tool arguments", () => {
  for (const [label, deep] of [["arrays", arrays], ["objects", objects]] as const) {
    for (const version of ["2025-03-26", undefined]) {
      const era = version ? "2025 revision" : "current revision";
      it(`${label} ${DEPTH} deep as a known argument's value (${era}): a tool error naming the argument`, async () => {
        const res = await post(call("engram_push", `{"content":${deep}}`), { version });
        expectClean(res);
        expect(res.body.result.isError).toBe(true);
        expect(res.body.result.content[0].text).toContain("content: Invalid input: expected string");
      });

      it(`${label} under an unknown argument (${era}): ignored as any unknown argument is`, async () => {
        const res = await post(call("engram_push", `{"content":"Nested ${label} ${era}","extra":${deep}}`), { version });
        expectClean(res);
        expect(res.body.result.isError).toBeFalsy();
      });

      it(`${label} as the arguments value itself (${era})`, async () => {
        const res = await post(call("engram_recall", deep), { version });
        expectClean(res);
        if (!res.body.error) expect(res.body.result.isError).toBe(true);
      });

      it(`${label} in _meta, in the id and inside a batch (${era})`, async () => {
        expectClean(await post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"engram_hubs","arguments":{},"_meta":${deep}}}`, { version }));
        expectClean(await post(`{"jsonrpc":"2.0","id":${deep},"method":"tools/call","params":{"name":"engram_hubs","arguments":{}}}`, { version }));
        if (version) {
          const batch = await post(`[${call("engram_hubs", "{}", 1)},${call("engram_push", `{"content":${deep}}`, 2)}]`, { version });
          expect(batch.status, batch.text.slice(0, 300)).toBeLessThan(500);
          expect(batch.text).not.toMatch(/call stack|RangeError/i);
        }
      });
    }
  }

  it("on /mcp/chatgpt too", async () => {
    const res = await post(call("search", `{"query":${arrays}}`), { path: "/mcp/chatgpt" });
    expectClean(res);
    expect(res.body.result.isError).toBe(true);
  });
});
