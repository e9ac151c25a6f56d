import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// The tools scope by their hub_id argument, but an X-Hub-ID header on the MCP request (a client configured
// with REST's headers) still reached engram_list through the request's context: without hub_id it listed
// that one hub where every other tool, and the tool's description, use every hub; and a slug there failed
// every list with "X-Hub-ID must be a hub id", about a header the model can neither see nor change.

let h: Harness;
let ann: Client;
let team: string;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  team = await h.teamHub(ann);
});

afterAll(async () => {
  await h.close();
});

async function call(name: string, args: Record<string, unknown>, hubHeader: string) {
  const req = new Request("http://engram.test/mcp", {
    method: "POST",
    headers: {
      authorization: `Bearer ${ann.key}`,
      "x-hub-id": hubHeader,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  const res = await mcpPost(req, { params: Promise.resolve({}) });
  return ((await res.json()) as any).result;
}

describe("an X-Hub-ID header on /mcp", () => {
  it("changes no tool: engram_list without hub_id lists every hub, whatever the header says", async () => {
    const personal = (await ann.post("/v1/memories", { content: "In the personal hub." })).body.data.id;
    const inTeam = (await ann.post("/v1/memories", { content: "In the team hub." }, { headers: { "x-hub-id": team } })).body.data.id;
    for (const header of [team, "some-slug"]) {
      const listed = await call("engram_list", {}, header);
      expect(listed.isError, JSON.stringify(listed)).toBeFalsy();
      expect(listed.structuredContent.memories.map((m: { id: string }) => m.id).sort()).toEqual([personal, inTeam].sort());
    }
    // hub_id still narrows.
    const narrowed = await call("engram_list", { hub_id: team }, ann.personalHubId);
    expect(narrowed.structuredContent.memories.map((m: { id: string }) => m.id)).toEqual([inTeam]);
  });
});
