import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { postMcp, toolCallRequest, openMcpToolCalls } from "./support/mcp-tool-calls.ts";

// /mcp/chatgpt serves the engram_* tools under other names (fetch, list_memories, list_hubs, …), but their
// results still told the model to call engram_get, engram_list or engram_hubs: tools that endpoint does
// not have, so a ChatGPT model following the hint called a tool that does not exist.

const mcp = openMcpToolCalls("/mcp/chatgpt");

describe("/mcp/chatgpt's tool results", () => {
  it("name the tools of that endpoint, never the engram_* ones", async () => {
    const unknownHub = await mcp.call("list_memories", { hub_id: "no-such-slug" });
    expect(unknownHub.result.isError).toBe(true);
    expect(unknownHub.text).toContain("list_hubs");
    expect(unknownHub.text).not.toContain("engram_");
    expect(unknownHub.result.structuredContent.error.message).not.toContain("engram_");

    const topic = (await mcp.ann.post("/v1/topics", { name: "Incidents", hub_id: mcp.ann.personalHubId })).body.data;
    const ids: string[] = [];
    for (let i = 0; i < 51; i++) ids.push((await mcp.ann.post("/v1/memories", { content: `incident ${i} ${randomBytes(4).toString("hex")}` })).body.data.id);
    await mcp.h.db.memory.updateMany({ where: { id: { in: ids } }, data: { topicId: topic.id } });
    const first = await mcp.call("list_topics", { topic_id: topic.id });
    expect(first.result.isError, first.text).toBeFalsy();
    expect(first.text).toContain(`More: call list_memories with topic_id "${topic.id}"`);
    expect(first.text).not.toContain("engram_");
    const rest = await mcp.call("list_memories", { topic_id: topic.id, hub_id: mcp.ann.personalHubId, sort: "newest", cursor: first.result.structuredContent.next_cursor });
    expect(rest.result.isError, rest.text).toBeFalsy();
    expect(rest.result.structuredContent.memories).toHaveLength(1);
  });
});

// memax_* names were rewritten to engram_* ones on /mcp/chatgpt too, which serves none: memax_push
// answered "tool engram_push not found", naming a tool the client never sent.
describe("/mcp/chatgpt and a memax_* name", () => {
  it("is reported unknown under the name the client sent", async () => {
    const req = toolCallRequest("/mcp/chatgpt", mcp.ann.key, "memax_push", { content: "never saved" });
    const before = await mcp.h.db.memory.count();
    const answer = JSON.stringify(await (await postMcp("/mcp/chatgpt", req)).json());
    expect(answer).toMatch(/not found/i);
    expect(answer).toContain("memax_push");
    expect(answer).not.toContain("engram_");
    expect(await mcp.h.db.memory.count()).toBe(before);
  });
});
