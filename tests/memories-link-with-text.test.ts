import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import type { HubContext } from "@/lib/api/context.ts";
import { createMemory } from "@/lib/memories/create-memory.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { sessionContext } from "./support/changed-mid-request.ts";

// A push labelled link whose content is a URL with more text after it is kept as text, with a warning:
// a rule of the domain (createMemory), so every way in to it keeps such a note alike.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

describe("a push labelled link with text after its URL", () => {
  it("is kept as text by createMemory itself, which reports the warning to its caller", async () => {
    const hub = await h.db.hub.findUniqueOrThrow({ where: { id: ann.personalHubId } });
    const ctx = { ...sessionContext(h, ann), hub, role: "owner" } as unknown as HubContext;
    const content = "https://example.test/glaze recipes to try";
    const result = await createMemory(ctx, { content, content_type: "link" });
    expect(result.created).toBe(true);
    expect(result.memory.content_type).not.toBe("link");
    expect(result.memory.source_path ?? null).toBeNull();
    expect(result.warnings).toEqual([expect.stringContaining('content_type "link" ignored')]);
    // A plain push warns of nothing.
    expect((await createMemory(ctx, { content: "glaze notes" })).warnings).toEqual([]);
  });

  it("engram_push keeps a URL with notes after it as a text memory, as REST does", async () => {
    const content = "https://example.test/kiln notes on firing";
    const req = new Request("http://engram.test/mcp", {
      method: "POST",
      headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "engram_push", arguments: { content } } }),
    });
    const res = await mcpPost(req, { params: Promise.resolve({}) });
    const body = (await res.json()) as any;
    expect(body.result.isError ?? false, JSON.stringify(body)).toBe(false);
    const memory = body.result.structuredContent.memory;
    expect(memory.content_type).not.toBe("link");
    expect((await ann.get(`/v1/memories/${memory.id}`)).body.data.content).toBe(content);
    const rest = await ann.post("/v1/memories", { content: "https://example.test/kiln notes on glazing", content_type: "link" });
    expect(rest.status).toBe(201);
    expect(rest.body.data.content_type).toBe(memory.content_type);
    expect(rest.headers.get("x-engram-warning")).toContain('content_type "link" ignored');
  });
});
