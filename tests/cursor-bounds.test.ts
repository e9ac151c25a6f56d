import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_CURSOR_LENGTH } from "@/lib/api/pagination.ts";
import { newId } from "@/lib/ids.ts";
import { CHATGPT_TOOLS, ENGRAM_TOOLS } from "@/lib/mcp/mcp-tools.ts";
import { openApiDocument } from "@/lib/openapi/openapi-document.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { postMcp, toolCallRequest, type McpPath } from "./support/mcp-tool-calls.ts";

// Only agent sessions bounded their cursor: every other list split, decoded and checked the signature
// of a cursor of any length (up to what the URL carries) before answering invalid_cursor. Every list
// the document describes with a cursor is walked, so a new one is covered as it is documented.

const doc = openApiDocument() as any;

function cursorOperations(): { method: string; path: string; schema: { maxLength?: number } }[] {
  const out = [];
  for (const [path, ops] of Object.entries(doc.paths) as [string, Record<string, any>][]) {
    for (const [method, op] of Object.entries(ops)) {
      const cursor = ((op.parameters ?? []) as any[])
        .map((p) => (p.$ref ? doc.components.parameters[(p.$ref as string).split("/").pop()!] : p))
        .find((p) => p.in === "query" && p.name === "cursor");
      if (cursor) out.push({ method, path, schema: cursor.schema });
    }
  }
  return out;
}

describe("every list's cursor parameter", () => {
  let h: Harness;
  let ann: Client;
  beforeAll(async () => {
    h = await createHarness();
    ann = await h.user("Ann");
  });
  afterAll(async () => {
    await h?.close();
  });

  it(`is at most ${MAX_CURSOR_LENGTH} characters, as documented: 400 invalid_request past it, before the cursor is read`, async () => {
    const operations = cursorOperations();
    expect(operations.map((op) => `${op.method} ${op.path}`)).toEqual(expect.arrayContaining([
      "get /v1/memories", "get /v1/agent-sessions", "get /v1/notifications", "get /v1/topics/{id}/memories", "get /v1/dreams/{id}/actions",
    ]));
    const answers: Record<string, unknown> = {};
    for (const { method, path, schema } of operations) {
      expect(method, path).toBe("get");
      const url = `${path.replace(/\{[^}]+\}/g, () => newId())}?cursor=${"a".repeat(MAX_CURSOR_LENGTH + 1)}`;
      const res = await ann.get(url);
      answers[path] = [schema.maxLength, res.status, res.body?.error?.code, res.body?.error?.details?.issues?.map((i: { path: string }) => i.path)];
    }
    expect(answers).toEqual(Object.fromEntries(operations.map(({ path }) => [path, [MAX_CURSOR_LENGTH, 400, "invalid_request", ["cursor"]]])));
  });
});

// MCP's list tools bounded `cursor` at 2,000 characters where REST takes 4,096: one list refused in one
// place the cursor it takes in the other (invalid_request, not REST's invalid_cursor), and tools/list
// stated a bound REST's documented one is not.
describe("the MCP list tools' cursor", () => {
  let h: Harness;
  let ann: Client;
  beforeAll(async () => {
    h = await createHarness();
    ann = await h.user("Ann");
  });
  afterAll(async () => {
    await h?.close();
  });

  async function call(path: McpPath, name: string, args: Record<string, unknown>) {
    const res = await postMcp(path, toolCallRequest(path, ann.key, name, args));
    return ((await res.json()) as any).result;
  }

  it(`is bounded as REST's is, at ${MAX_CURSOR_LENGTH} characters, in the listed schema and the tool alike`, async () => {
    const tools: [McpPath, string, Record<string, unknown>][] = [
      ["/mcp", "engram_list", {}],
      ["/mcp", "engram_hub_members", { hub_id: "personal" }],
      ["/mcp/chatgpt", "list_memories", {}],
      ["/mcp/chatgpt", "list_hub_members", { hub_id: "personal" }],
    ];
    const answers: Record<string, unknown> = {};
    for (const [path, name, args] of tools) {
      const tool = [...ENGRAM_TOOLS, ...CHATGPT_TOOLS].find((t) => t.name === name)!;
      const listed = (tool.input["~standard"].jsonSchema.input({ target: "draft-2020-12" }) as any).properties.cursor.maxLength;
      const within = await call(path, name, { ...args, cursor: "a".repeat(MAX_CURSOR_LENGTH) });
      const past = await call(path, name, { ...args, cursor: "a".repeat(MAX_CURSOR_LENGTH + 1) });
      answers[name] = [listed, within.structuredContent.error?.code, past.structuredContent.error?.code, past.structuredContent.error?.details?.issues?.map((i: { path: string }) => i.path)];
    }
    // Within the bound the cursor is read (and this one is not valid); past it, refused by its length.
    expect(answers).toEqual(Object.fromEntries(tools.map(([, name]) => [name, [MAX_CURSOR_LENGTH, "invalid_cursor", "invalid_request", ["cursor"]]])));
  });
});
