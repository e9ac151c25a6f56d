import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// engram_push dropped createMemory's warnings (input ignored or coerced rather than refused), which
// REST sends as X-Engram-Warning: the agent was never told. It also took no source_agent, REST's own
// field, so a push over an OAuth token or a plain key named no agent.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

async function call(key: string, name: string, args: Record<string, unknown>) {
  const req = new Request("http://engram.test/mcp", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  const result = ((await (await mcpPost(req, { params: Promise.resolve({}) })).json()) as any).result;
  return { result, text: (result.content as { text: string }[]).map((c) => c.text).join("\n"), data: result.structuredContent };
}

describe("engram_push warnings", () => {
  it("takes source_agent as REST does, and tells the agent what REST's X-Engram-Warning would have said", async () => {
    const said = await call(ann.key, "engram_push", { content: "Deploys run migrations first.", source_agent: "claude-code" });
    expect(said.result.isError, said.text).toBeFalsy();
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: said.data.memory.id } })).sourceAgent).toBe("claude-code");
    expect(said.data.warnings).toEqual([]);
    expect(said.text).not.toMatch(/warning/i);

    const agentKey = (await ann.post("/v1/auth/api-keys", { name: "codex key", agent_name: "codex" })).body.data.key;
    const rest = await ann.post("/v1/memories", { content: "Rollbacks need a ticket.", source_agent: "someone-else" }, { headers: { authorization: `Bearer ${agentKey}` } });
    const warning = rest.headers.get("x-engram-warning");
    expect(warning).toMatch(/source_agent ignored/);

    const claimed = await call(agentKey, "engram_push", { content: "Releases go out on Tuesdays.", source_agent: "someone-else" });
    expect(claimed.result.isError, claimed.text).toBeFalsy();
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: claimed.data.memory.id } })).sourceAgent).toBe("codex");
    expect(claimed.data.warnings).toEqual([warning]);
    expect(claimed.text).toContain(`Warning: ${warning}`);

    const long = await call(ann.key, "engram_push", { content: "Too long a name.", source_agent: "a".repeat(101) });
    expect(long.data.error.code).toBe("invalid_request");
    expect(long.data.error.message).toContain("source_agent");
  });
});
