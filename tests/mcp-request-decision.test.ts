import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Memax's CLI MCP server has memax_request_decision (a decision card on the user's board), and Engram's
// /mcp maps memax_* names onto engram_* ones, but had no engram_request_decision: an agent configured
// for Memax calling it got "Tool engram_request_decision not found".

let h: Harness;
let ann: Client;
let bob: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
});

afterAll(async () => {
  await h.close();
});

async function rpc(key: string, method: string, params: Record<string, unknown>) {
  const req = new Request("http://engram.test/mcp", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const res = await mcpPost(req, { params: Promise.resolve({}) });
  return ((await res.json()) as any).result;
}

async function call(key: string, name: string, args: Record<string, unknown>) {
  const result = await rpc(key, "tools/call", { name, arguments: args });
  return { result, text: (result.content as { text: string }[]).map((c) => c.text).join("\n"), data: result.structuredContent };
}

const gates = (hubId: string) => h.db.decisionGate.count({ where: { hubId } });

describe("engram_request_decision", () => {
  it("is listed as a write tool with its input schema", async () => {
    const { tools } = await rpc(ann.key, "tools/list", {});
    const tool = tools.find((t: { name: string }) => t.name === "engram_request_decision");
    expect(tool).toBeDefined();
    expect(tool.inputSchema.required.sort()).toEqual(["options", "question"]);
    expect(tool.inputSchema.properties.options).toMatchObject({ type: "array", minItems: 2, maxItems: 4 });
    expect(tool.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false });
  });

  it("asks on the personal hub's board by default, under its memax_* name too", async () => {
    const asked = await call(ann.key, "memax_request_decision", { question: "Postgres or SQLite?", options: ["Postgres", "SQLite"], context: "Ops cost matters." });
    expect(asked.result.isError, asked.text).toBeFalsy();
    expect(asked.data.slot).toMatchObject({ kind: "decision_gate", slot_key: expect.stringMatching(/^decision:/) });
    expect(asked.text).toContain(asked.data.slot.slot_key);
    const gate = await h.db.decisionGate.findFirstOrThrow({ where: { hubId: ann.personalHubId } });
    expect(gate).toMatchObject({ question: "Postgres or SQLite?", options: ["Postgres", "SQLite"], context: "Ops cost matters.", requestedBy: ann.id });
    // The same card the REST route makes: on the board, and pending in the bell.
    const board = await ann.get(`/v1/hubs/${ann.personalHubId}/board`);
    expect(JSON.stringify(board.body)).toContain("Postgres or SQLite?");
    expect(await h.db.notification.count({ where: { userId: ann.id, kind: "decision_gate" } })).toBe(1);
  });

  it("takes hub_id as an id, a slug or personal, and validates as POST /v1/hubs/{id}/board/decision-gate does", async () => {
    const team = await h.teamHub(ann);
    const slug = (await h.db.hub.findUniqueOrThrow({ where: { id: team } })).slug;
    const asked = await call(ann.key, "engram_request_decision", { question: "Ship Friday?", options: ["Yes", "No"], hub_id: slug.toUpperCase() });
    expect(asked.result.isError, asked.text).toBeFalsy();
    expect(await gates(team)).toBe(1);

    for (const [args, field] of [
      [{ question: "One option?", options: ["Only"] }, "options"],
      [{ question: "Same?", options: ["A", "a"] }, "options"],
      [{ question: "   ", options: ["A", "B"] }, "question"],
      [{ options: ["A", "B"] }, "question"],
    ] as const) {
      const refused = await call(ann.key, "engram_request_decision", { ...args, hub_id: team });
      expect(refused.result.isError).toBe(true);
      expect(refused.data.error.code).toBe("invalid_request");
      expect(refused.data.error.message).toContain(field);
    }
    expect(await gates(team)).toBe(1);
  });

  it("needs write access: a read-only key and a viewer are refused; a hub out of reach is not found", async () => {
    const readOnly = (await ann.post("/v1/auth/api-keys", { name: "reader", scopes: ["read"] })).body.data.key;
    const before = await gates(ann.personalHubId);
    const refused = await call(readOnly, "engram_request_decision", { question: "Read-only?", options: ["A", "B"] });
    expect(refused.result.isError).toBe(true);
    expect(refused.data.error.code).toBe("forbidden");
    expect(await gates(ann.personalHubId)).toBe(before);

    const viewed = await h.teamHub(bob, [[ann, "viewer"]]);
    const viewer = await call(ann.key, "engram_request_decision", { question: "Viewer?", options: ["A", "B"], hub_id: viewed });
    expect(viewer.data.error.code).toBe("forbidden");

    const outsider = await call(ann.key, "engram_request_decision", { question: "Bob's board?", options: ["A", "B"], hub_id: bob.personalHubId });
    expect(outsider.result.isError).toBe(true);
    expect(outsider.data.error.code).toBe("not_found");
    const limited = (await ann.post("/v1/auth/api-keys", { name: "team only", hub_ids: [viewed] })).body.data.key;
    const unreached = await call(limited, "engram_request_decision", { question: "Personal?", options: ["A", "B"], hub_id: "personal" });
    expect(unreached.data.error.code).toBe("not_found");
    expect(await gates(bob.personalHubId)).toBe(0);
    expect(await gates(viewed)).toBe(0);
  });

  // The tool took no source_agent, as POST /v1/hubs/{id}/board/decision-gate does: asked over an OAuth
  // token or a key not issued for an agent, the card named no agent at all.
  it("takes source_agent, bounded as REST's, and a key issued for an agent asks as that agent whatever it says", async () => {
    const cara = await h.user("Cara");
    const said = await call(cara.key, "engram_request_decision", { question: "Tabs or spaces?", options: ["Tabs", "Spaces"], source_agent: "claude-code" });
    expect(said.result.isError, said.text).toBeFalsy();
    expect((await h.db.decisionGate.findFirstOrThrow({ where: { question: "Tabs or spaces?" } })).sourceAgent).toBe("claude-code");

    const agentKey = (await cara.post("/v1/auth/api-keys", { name: "codex key", agent_name: "codex" })).body.data.key;
    const claimed = await call(agentKey, "engram_request_decision", { question: "Monorepo?", options: ["Yes", "No"], source_agent: "someone-else" });
    expect(claimed.result.isError, claimed.text).toBeFalsy();
    expect((await h.db.decisionGate.findFirstOrThrow({ where: { question: "Monorepo?" } })).sourceAgent).toBe("codex");

    const long = await call(cara.key, "engram_request_decision", { question: "Too long?", options: ["A", "B"], source_agent: "a".repeat(65) });
    expect(long.data.error.code).toBe("invalid_request");
    expect(long.data.error.message).toContain("source_agent");
    expect(await gates(cara.personalHubId)).toBe(2);
  });
});
