import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createHarness, type Client as ApiClient, type Harness } from "./support/harness.ts";
import { startAppServer } from "./support/app-server.ts";

let h: Harness;
let server: { url: string; close(): Promise<void> };
let ann: ApiClient;

beforeAll(async () => {
  h = await createHarness();
  server = await startAppServer(3510);
  ann = await h.user("Ann");
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

async function connect(key: string | undefined, options: { path?: string; negotiation?: "legacy" | "auto" } = {}) {
  const client = new Client({ name: "engram-test", version: "1.0.0" }, { versionNegotiation: { mode: options.negotiation ?? "legacy" } });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}${options.path ?? "/mcp"}`), {
    requestInit: key ? { headers: { authorization: `Bearer ${key}` } } : undefined,
  });
  await client.connect(transport);
  return client;
}

describe("MCP over Streamable HTTP", () => {
  it("initializes and lists the tools (legacy handshake)", async () => {
    const client = await connect(ann.key);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      ["engram_capture", "engram_forget", "engram_get", "engram_hub_members", "engram_hubs", "engram_list", "engram_push", "engram_recall", "engram_topics"].sort(),
    );
    await client.close();
  });
  it("works with the current revision", async () => {
    const client = await connect(ann.key, { negotiation: "auto" });
    const { tools } = await client.listTools();
    expect(tools.length).toBe(9);
    const res = await client.callTool({ name: "engram_hubs", arguments: {} });
    expect(res.isError).toBeFalsy();
    console.log(JSON.stringify(res).slice(0, 500));
    await client.close();
  });
});
