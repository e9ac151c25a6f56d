import { afterAll, beforeAll } from "vitest";
import { POST as chatgptPost } from "@/app/mcp/chatgpt/route.ts";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { createHarness, type Client, type Harness } from "./harness.ts";

export type McpPath = "/mcp" | "/mcp/chatgpt";

/** One tools/call as a 2025-06-18 client sends it (the revision most clients in the wild speak). */
export function toolCallRequest(path: McpPath, key: string, name: string, args: Record<string, unknown>): Request {
  return new Request(`http://engram.test${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
}

/** The route handler of `path`, called as Next.js calls it. */
export function postMcp(path: McpPath, req: Request): Promise<Response> {
  return (path === "/mcp" ? mcpPost : chatgptPost)(req, { params: Promise.resolve({}) });
}

/**
 * A fresh harness and Ann for a file's tests (opened before them, closed after), and `call`, which
 * calls one of `path`'s tools as Ann: the tool result, its text and its structured error.
 */
export function openMcpToolCalls(path: McpPath) {
  const env = {} as { h: Harness; ann: Client };
  beforeAll(async () => {
    env.h = await createHarness();
    env.ann = await env.h.user("Ann");
  });
  afterAll(async () => {
    await env.h?.close();
  });
  return {
    get h() {
      return env.h;
    },
    get ann() {
      return env.ann;
    },
    async call(name: string, args: Record<string, unknown>) {
      const res = await postMcp(path, toolCallRequest(path, env.ann.key, name, args));
      const result = ((await res.json()) as any).result;
      return { result, text: (result.content as { text: string }[]).map((c) => c.text).join("\n"), error: result.structuredContent?.error };
    },
  };
}
