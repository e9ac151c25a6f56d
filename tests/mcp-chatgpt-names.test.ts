import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as chatgptPost } from "@/app/mcp/chatgpt/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// /mcp/chatgpt serves the engram_* tools under other names (fetch, list_memories, list_hubs, …), but their
// results still told the model to call engram_get, engram_list or engram_hubs: tools that endpoint does
// not have, so a ChatGPT model following the hint called a tool that does not exist.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

async function call(name: string, args: Record<string, unknown>) {
  const req = new Request("http://engram.test/mcp/chatgpt", {
    method: "POST",
    headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  const res = await chatgptPost(req, { params: Promise.resolve({}) });
  const result = ((await res.json()) as any).result;
  return { result, text: (result.content as { text: string }[]).map((c) => c.text).join("\n") };
}

describe("/mcp/chatgpt's tool results", () => {
  it("name the tools of that endpoint, never the engram_* ones", async () => {
    const unknownHub = await call("list_memories", { hub_id: "no-such-slug" });
    expect(unknownHub.result.isError).toBe(true);
    expect(unknownHub.text).toContain("list_hubs");
    expect(unknownHub.text).not.toContain("engram_");
    expect(unknownHub.result.structuredContent.error.message).not.toContain("engram_");

    const topic = (await ann.post("/v1/topics", { name: "Incidents", hub_id: ann.personalHubId })).body.data;
    const ids: string[] = [];
    for (let i = 0; i < 51; i++) ids.push((await ann.post("/v1/memories", { content: `incident ${i} ${randomBytes(4).toString("hex")}` })).body.data.id);
    await h.db.memory.updateMany({ where: { id: { in: ids } }, data: { topicId: topic.id } });
    const first = await call("list_topics", { topic_id: topic.id });
    expect(first.result.isError, first.text).toBeFalsy();
    expect(first.text).toContain(`More: call list_memories with topic_id "${topic.id}"`);
    expect(first.text).not.toContain("engram_");
    const rest = await call("list_memories", { topic_id: topic.id, hub_id: ann.personalHubId, sort: "newest", cursor: first.result.structuredContent.next_cursor });
    expect(rest.result.isError, rest.text).toBeFalsy();
    expect(rest.result.structuredContent.memories).toHaveLength(1);
  });
});

// memax_* names were rewritten to engram_* ones on /mcp/chatgpt too, which serves none: memax_push
// answered "tool engram_push not found", naming a tool the client never sent.
describe("/mcp/chatgpt and a memax_* name", () => {
  it("is reported unknown under the name the client sent", async () => {
    const req = new Request("http://engram.test/mcp/chatgpt", {
      method: "POST",
      headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "memax_push", arguments: { content: "never saved" } } }),
    });
    const before = await h.db.memory.count();
    const answer = JSON.stringify(await (await chatgptPost(req, { params: Promise.resolve({}) })).json());
    expect(answer).toMatch(/not found/i);
    expect(answer).toContain("memax_push");
    expect(answer).not.toContain("engram_");
    expect(await h.db.memory.count()).toBe(before);
  });
});
