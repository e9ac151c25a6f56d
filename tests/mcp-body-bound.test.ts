import { describe, expect, it } from "vitest";
import { MAX_CONTENT_BYTES } from "@/lib/memories/memory-fields.ts";
import { openMcpToolCalls, postMcp, toolCallRequest } from "./support/mcp-tool-calls.ts";

// engram_push takes content of up to 3 MiB, but the MCP body was capped at 4 MiB: content heavy in JSON
// escapes (a quote is 2 bytes in JSON, a control character 6) was refused with 413 while within the
// content limit. The body bound follows from the content's worst-case JSON encoding now.

const mcp = openMcpToolCalls("/mcp");

describe("an MCP request body", () => {
  it("holds a push of content within its limit however much of it JSON escapes", async () => {
    // Every byte a control character: 3 MiB of content, 18 MiB of JSON.
    const content = `Escapes\n${"\u0001".repeat(MAX_CONTENT_BYTES - 8)}`;
    expect(Buffer.byteLength(content)).toBe(MAX_CONTENT_BYTES);
    const req = toolCallRequest("/mcp", mcp.ann.key, "engram_push", { content, title: "Escaped" });
    const res = await postMcp("/mcp", req);
    expect(res.status).toBe(200);
    const result = ((await res.json()) as any).result;
    expect(result.isError, JSON.stringify(result.structuredContent)).toBeFalsy();
    expect(result.structuredContent.memory.title).toBe("Escaped");
  }, 60_000);

  it("holds that push with every other argument at its bounds, escaped too", async () => {
    const content = `Escapes\n${"\u0001".repeat(MAX_CONTENT_BYTES - 8)}`;
    // 32 keys of project_context, each value 1,000 control characters: 192,000 bytes of JSON beside the content.
    const projectContext = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`key-${i}`, "\u0001".repeat(1000)]));
    const args = { content, title: "\u0001".repeat(200), hint: "\u0001".repeat(2000), hub_reason: "\u0001".repeat(2000), project_context: projectContext };
    const res = await postMcp("/mcp", toolCallRequest("/mcp", mcp.ann.key, "engram_push", args));
    expect(res.status).toBe(200);
    const result = ((await res.json()) as any).result;
    // Answered by the tool (whatever it makes of the control characters in the title), not refused unread.
    expect(result.content).toBeDefined();
  }, 60_000);

  it("is still refused past the bound: content over its limit, escaped, is refused unread", async () => {
    const content = "\u0001".repeat(MAX_CONTENT_BYTES + 256 * 1024);
    const res = await postMcp("/mcp", toolCallRequest("/mcp", mcp.ann.key, "engram_push", { content }));
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error.code).toBe(-32600);
  }, 60_000);
});
