import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { OPTIONS as mcpOptions, POST as mcpPost } from "@/app/mcp/route.ts";
import { createHarness, type Client as ApiClient, type Harness } from "./support/harness.ts";

// A browser client (the MCP Inspector) calls /mcp cross-origin: each request header it sets must be in the
// preflight's Access-Control-Allow-Headers, or the browser never sends the request. The 2026-07-28 revision
// sends Mcp-Method on every request and Mcp-Name on a tools/call, which the preflight did not allow.

let h: Harness;
let ann: ApiClient;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

// What a browser may send without the server's leave (the CORS-safelisted request headers).
const SAFELISTED = new Set(["accept", "accept-language", "content-language"]);

describe("the MCP preflight", () => {
  it("allows every header the SDK's client sends on the current revision and the 2025 ones", async () => {
    const sent = new Set<string>();
    const viaHandler: typeof fetch = async (input, init) => {
      const req = new Request(input, init);
      for (const name of req.headers.keys()) sent.add(name.toLowerCase());
      return mcpPost(req, { params: Promise.resolve({}) });
    };
    for (const mode of ["auto", "legacy"] as const) {
      const client = new Client({ name: "browser-like", version: "1.0.0" }, { versionNegotiation: { mode } });
      const transport = new StreamableHTTPClientTransport(new URL("http://engram.test/mcp"), {
        fetch: viaHandler,
        requestInit: { headers: { authorization: `Bearer ${ann.key}` } },
      });
      await client.connect(transport);
      await client.listTools();
      const res = await client.callTool({ name: "engram_hubs", arguments: {} });
      expect(res.isError, mode).toBeFalsy();
      await client.close();
    }
    expect(sent).toContain("mcp-protocol-version");

    const preflight = await mcpOptions();
    expect(preflight.status).toBe(204);
    const allowed = new Set((preflight.headers.get("access-control-allow-headers") ?? "").toLowerCase().split(/\s*,\s*/));
    const refused = [...sent].filter((name) => !SAFELISTED.has(name) && !allowed.has(name));
    expect(refused).toEqual([]);
  });
});
