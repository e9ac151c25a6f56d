import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { encode } from "next-auth/jwt";
import { sessionSecret } from "@/lib/auth/session.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import pg from "pg";
import { charactersRead } from "./support/characters-read.ts";
import { createHarness, testPostgres, type Client as ApiClient, type Harness } from "./support/harness.ts";
import { startAppServer } from "./support/app-server.ts";
import { indexMemories } from "./recall-helpers.ts";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { MAX_READ_CHARS } from "@/lib/mcp/mcp-tools.ts";
import { MAX_MCP_BODY_BYTES } from "@/lib/mcp/serve-mcp.ts";

/**
 * The MCP SDK's own client against the real route handlers behind a real HTTP listener
 * (tests/support/app-server.ts): the same handler code `next start` serves, without a
 * production build per test run, on a fresh embedded database.
 */

let h: Harness;
let server: { url: string; close(): Promise<void> };
let ann: ApiClient;
let bob: ApiClient;
let teamHubId: string;
let teamSlug: string;
let bobHubId: string;
const open: Client[] = [];

beforeAll(async () => {
  h = await createHarness();
  server = await startAppServer();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  teamHubId = await h.teamHub(ann);
  teamSlug = (await h.db.hub.findUniqueOrThrow({ where: { id: teamHubId } })).slug;
  bobHubId = await h.teamHub(bob);
});
afterAll(async () => {
  for (const client of open) await client.close().catch(() => undefined);
  await server?.close();
  await h?.close();
});

async function connect(key: string | undefined, options: { path?: string; negotiation?: "legacy" | "auto" } = {}) {
  const client = new Client({ name: "engram-test", version: "1.0.0" }, { versionNegotiation: { mode: options.negotiation ?? "legacy" } });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}${options.path ?? "/mcp"}`), {
    requestInit: key ? { headers: { authorization: `Bearer ${key}` } } : undefined,
  });
  await client.connect(transport);
  open.push(client);
  return client;
}

type Result = Awaited<ReturnType<Client["callTool"]>>;
const text = (r: Result) => (r.content as { type: string; text: string }[]).map((c) => c.text).join("\n");
const data = <T = any>(r: Result) => r.structuredContent as T;

async function raw(body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    type: res.headers.get("content-type"),
    expose: res.headers.get("access-control-expose-headers"),
    retryAfter: res.headers.get("retry-after"),
    body: (await res.json().catch(() => undefined)) as any,
  };
}

describe("protocol", () => {
  it("lists the tools with annotations, and no memax_* aliases", async () => {
    const client = await connect(ann.key);
    expect(client.getServerVersion()?.name).toBe("engram");
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect([...byName.keys()].sort()).toEqual(
      [
        "engram_ask",
        "engram_capture",
        "engram_forget",
        "engram_get",
        "engram_hub_members",
        "engram_hubs",
        "engram_list",
        "engram_push",
        "engram_recall",
        "engram_request_decision",
        "engram_topics",
      ].sort(),
    );
    expect(byName.get("engram_recall")!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    expect(byName.get("engram_push")!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false });
    expect(byName.get("engram_forget")!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(byName.get("engram_recall")!.inputSchema.required).toEqual(["query"]);
    expect(byName.get("engram_ask")!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    expect(byName.get("engram_ask")!.inputSchema.required).toEqual(["query"]);
    expect(tools.some((t) => t.name.startsWith("memax_"))).toBe(false);
  });

  it("answers the 2026-07-28 revision and 2025-03-26 initialize, statelessly, in JSON", async () => {
    const modern = await connect(ann.key, { negotiation: "auto" });
    expect((await modern.listTools()).tools).toHaveLength(11);
    expect(data(await modern.callTool({ name: "engram_hubs", arguments: {} })).hubs.length).toBeGreaterThan(0);

    const init = await raw({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "old", version: "1" } } });
    expect(init.status).toBe(200);
    expect(init.type).toContain("application/json");
    expect(init.body.result.protocolVersion).toBe("2025-03-26");
    // No session: a tools/call needs nothing from an earlier request.
    const call = await raw({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "engram_hubs", arguments: {} } }, { "mcp-protocol-version": "2025-03-26" });
    expect(call.status).toBe(200);
    expect(call.body.result.content[0].text).toContain("Personal");
    expect((await fetch(`${server.url}/mcp`, { headers: { authorization: `Bearer ${ann.key}` } })).status).toBe(405);
    const preflight = await fetch(`${server.url}/mcp`, { method: "OPTIONS", headers: { origin: "http://inspector.example", "access-control-request-method": "POST" } });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-headers")).toContain("mcp-protocol-version");
    // A browser client probes GET (a server stream) and sends DELETE (ending a session): it must read the 405, not
    // a CORS failure it cannot tell from a network error.
    expect(preflight.headers.get("access-control-allow-methods")).toMatch(/GET.*DELETE/);
    for (const [method, path] of [["GET", "/mcp"], ["DELETE", "/mcp"], ["GET", "/mcp/chatgpt"], ["DELETE", "/mcp/chatgpt"]] as const) {
      const refused = await fetch(`${server.url}${path}`, { method, headers: { origin: "http://inspector.example", authorization: `Bearer ${ann.key}` } });
      expect([method, path, refused.status]).toEqual([method, path, 405]);
      expect(refused.headers.get("access-control-allow-origin")).toBe("*");
    }
    const garbage = await fetch(`${server.url}/mcp`, { method: "POST", headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json" }, body: "{not json" });
    expect(garbage.status).toBe(400);
    expect(((await garbage.json()) as any).error.code).toBe(-32700);
  });

  it("a subscriptions/listen holds no event stream open: the tool list never changes, and says so", async () => {
    const modern = await connect(ann.key, { negotiation: "auto" });
    expect(modern.getServerCapabilities()?.tools?.listChanged).toBe(false);
    const subscription = await modern.listen({ toolsListChanged: true, resourcesListChanged: true, promptsListChanged: true });
    expect(subscription.honoredFilter).toEqual({});
    const ended = await Promise.race([subscription.closed, new Promise((resolve) => setTimeout(() => resolve("still open"), 3_000))]);
    expect(ended).toBe("graceful");
  });

  it("refuses the dashboard cookie and a bad key with 401", async () => {
    const cookie = `next-auth.session-token=${await encode({ token: { sub: ann.id }, secret: await sessionSecret(h.db) })}`;
    // Cross-site pages could ride the cookie; MCP takes bearer credentials only.
    const res = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { cookie, origin: server.url, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain("resource_metadata=");
    await expect(connect(`egk_${randomBytes(32).toString("base64url")}`)).rejects.toThrow();
  });
});

describe("request bounds", () => {
  it("refuses a chunked body over its bound after reading that much of it, not after buffering it whole", async () => {
    const chunk = new Uint8Array(64 * 1024).fill(0x20);
    let pulled = 0;
    // 64 MiB of spaces, sent without Content-Length: only a streamed cap stops early.
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled >= 64 * 1024 * 1024) return controller.close();
        pulled += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const req = new Request("http://engram.test/mcp", {
      method: "POST",
      headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body,
      duplex: "half",
    } as RequestInit);
    const res = await mcpPost(req, { params: Promise.resolve({}) });
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error.code).toBe(-32600);
    expect(pulled).toBeLessThanOrEqual(MAX_MCP_BODY_BYTES + 1024 * 1024);
  });
});

describe("rate limits", () => {
  it("engram_recall counts against the heavy bucket, other tools do not", async () => {
    // A frozen clock: a minute boundary between the calls would otherwise let the sliding window admit one more.
    const frozen = Date.now();
    setRateLimiter(new MemoryRateLimiter({ regular: 1_000, heavy: 2, light: 1_000 }, () => frozen));
    try {
      const recall = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "engram_recall", arguments: { query: "anything" } } };
      const headers = { "mcp-protocol-version": "2025-03-26" };
      expect((await raw(recall, headers)).status).toBe(200);
      expect((await raw(recall, headers)).status).toBe(200);
      const limited = await raw(recall, headers);
      expect(limited.status).toBe(429);
      expect(limited.body.error.data.code).toBe("rate_limited");
      // A browser client (CORS) may read only exposed headers: when to retry must be one of them.
      const exposed = limited.expose!.toLowerCase().split(/,\s*/);
      expect(exposed).toEqual(expect.arrayContaining(["retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"]));
      expect((await raw({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "engram_hubs", arguments: {} } }, headers)).status).toBe(200);
      // Ask shares the bucket (as POST /v1/ask does), under its alias too.
      const ask = { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "memax_ask", arguments: { query: "anything" } } };
      expect((await raw(ask, headers)).status).toBe(429);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1_000_000, heavy: 1_000_000, light: 1_000_000 }));
    }
  });

  it("a recall spends one heavy token and no regular one, as POST /v1/recall does; a refused call is a JSON-RPC error", async () => {
    const frozen = Date.now();
    setRateLimiter(new MemoryRateLimiter({ regular: 1, heavy: 1_000, light: 1_000 }, () => frozen));
    try {
      const headers = { "mcp-protocol-version": "2025-03-26" };
      const call = (id: number, name: string, args: object) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } });
      for (const id of [1, 2, 3]) expect((await raw(call(id, "engram_recall", { query: "anything" }), headers)).status).toBe(200);
      expect((await raw(call(4, "engram_hubs", {}), headers)).status).toBe(200);
      // The regular bucket (1) is spent now: refused in JSON-RPC's own terms, REST's code in its data.
      const limited = await raw(call(5, "engram_hubs", {}), headers);
      expect(limited.status).toBe(429);
      expect(limited.retryAfter).toMatch(/^\d+$/);
      expect(limited.body).toMatchObject({ jsonrpc: "2.0", id: 5, error: { code: -32000, data: { code: "rate_limited", limit: 1, retry_after: Number(limited.retryAfter) } } });
      expect(limited.body.error.message).toMatch(/rate limit/i);
      // A request without tool calls (initialize, tools/list) pays one regular token, refused the same way.
      const listed = await raw({ jsonrpc: "2.0", id: 6, method: "tools/list" }, headers);
      expect([listed.status, listed.body?.jsonrpc, listed.body?.id, listed.body?.error?.data?.code]).toEqual([429, "2.0", 6, "rate_limited"]);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1_000_000, heavy: 1_000_000, light: 1_000_000 }));
    }
  });

  it("a JSON-RPC batch pays for every call in it, not once per HTTP request", async () => {
    const frozen = Date.now();
    setRateLimiter(new MemoryRateLimiter({ regular: 5, heavy: 3, light: 1_000 }, () => frozen));
    try {
      const headers = { "mcp-protocol-version": "2025-03-26" };
      const recall = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_recall", arguments: { query: "anything" } } });
      const hubs = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_hubs", arguments: {} } });
      // Four recalls in one request: more than the heavy bucket's whole 3, so it can never pass (400).
      expect((await raw([1, 2, 3, 4].map(recall), headers)).status).toBe(400);
      // Three after one: more than the 2 left.
      expect((await raw(recall(0), headers)).status).toBe(200);
      expect((await raw([1, 2, 3].map(recall), headers)).status).toBe(429);
      setRateLimiter(new MemoryRateLimiter({ regular: 5, heavy: 3, light: 1_000 }, () => frozen));
      expect((await raw([1, 2, 3].map(recall), headers)).status).toBe(200);
      // The heavy bucket is spent (3 recalls = 3 heavy tokens, no regular one).
      expect((await raw(recall(9), headers)).status).toBe(429);
      setRateLimiter(new MemoryRateLimiter({ regular: 5, heavy: 3, light: 1_000 }, () => frozen));
      expect((await raw([1, 2, 3, 4, 5, 6].map(hubs), headers)).status).toBe(400);
      expect((await raw(hubs(0), headers)).status).toBe(200);
      expect((await raw([1, 2, 3, 4, 5].map(hubs), headers)).status).toBe(429);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1_000_000, heavy: 1_000_000, light: 1_000_000 }));
    }
  });

  it("a client over its regular limit is refused before its body is read whole, and without spending a token", async () => {
    const frozen = Date.now();
    setRateLimiter(new MemoryRateLimiter({ regular: 1, heavy: 1, light: 1_000 }, () => frozen));
    try {
      const headers = { "mcp-protocol-version": "2025-03-26" };
      expect((await raw({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "engram_hubs", arguments: {} } }, headers)).status).toBe(200);
      // A push of almost 4 MiB, streamed: only the start of it is read once the regular bucket is empty.
      const text = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "engram_push", arguments: { content: "x".repeat(3_900_000) } } });
      const bytes = new TextEncoder().encode(text);
      let pulled = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (pulled >= bytes.byteLength) return controller.close();
          controller.enqueue(bytes.subarray(pulled, pulled + 64 * 1024));
          pulled += 64 * 1024;
        },
      });
      const req = new Request("http://engram.test/mcp", {
        method: "POST",
        headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body,
        duplex: "half",
      } as RequestInit);
      const res = await mcpPost(req, { params: Promise.resolve({}) });
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(((await res.json()) as any).error.data.code).toBe("rate_limited");
      expect(pulled).toBeLessThanOrEqual(256 * 1024);
      // The check spent nothing: the heavy bucket's one token is still there for a recall.
      const recall = { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "engram_recall", arguments: { query: "anything" } } };
      expect((await raw(recall, headers)).status).toBe(200);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1_000_000, heavy: 1_000_000, light: 1_000_000 }));
    }
  });

  it("a refusal follows JSON-RPC: a batch gets one error per request, a notification none", async () => {
    const frozen = Date.now();
    // A cap of 2: a batch of two calls fits it whole, and is refused for want of what is left, not as one that never can.
    setRateLimiter(new MemoryRateLimiter({ regular: 2, heavy: 1_000, light: 1_000 }, () => frozen));
    try {
      const headers = { "mcp-protocol-version": "2025-03-26" };
      const hubs = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_hubs", arguments: {} } });
      const notification = { jsonrpc: "2.0", method: "notifications/initialized" };
      expect((await raw(hubs(0), headers)).status).toBe(200);
      expect((await raw(hubs(1), headers)).status).toBe(200);
      const batch = await raw([hubs(2), notification, hubs(3)], headers);
      expect(batch.status).toBe(429);
      expect(batch.body).toEqual([
        { jsonrpc: "2.0", id: 2, error: expect.objectContaining({ code: -32000, data: expect.objectContaining({ code: "rate_limited" }) }) },
        { jsonrpc: "2.0", id: 3, error: expect.objectContaining({ code: -32000, data: expect.objectContaining({ code: "rate_limited" }) }) },
      ]);
      for (const body of [notification, [notification, notification]]) {
        const refused = await raw(body, headers);
        expect(refused.status).toBe(429);
        expect(refused.retryAfter).toMatch(/^\d+$/);
        expect(refused.body).toBeUndefined();
      }
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1_000_000, heavy: 1_000_000, light: 1_000_000 }));
    }
  });

  it("a batch over 100 messages is refused before it is charged: it spends none of the rate limit", async () => {
    const frozen = Date.now();
    setRateLimiter(new MemoryRateLimiter({ regular: 5, heavy: 5, light: 1_000 }, () => frozen));
    try {
      const headers = { "mcp-protocol-version": "2025-03-26" };
      const hubs = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_hubs", arguments: {} } });
      const tooMany = await raw(Array.from({ length: 101 }, (_, i) => hubs(i)), headers);
      expect(tooMany.status).toBe(400);
      expect(tooMany.body.error.code).toBe(-32600);
      // Only the refused request's one token is spent: four calls in one batch still fit.
      expect((await raw([1, 2, 3, 4].map(hubs), headers)).status).toBe(200);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1_000_000, heavy: 1_000_000, light: 1_000_000 }));
    }
  });
});

describe("tools", () => {
  it("push → recall → get → forget", async () => {
    const client = await connect(ann.key);
    const tag = randomBytes(4).toString("hex");
    const pushed = await client.callTool({
      name: "engram_push",
      arguments: { content: `# Deploys ${tag}\n\nWe deploy the zephyr service with blue-green switches on Fridays.`, tags: ["ops"], hub_id: teamSlug },
    });
    expect(pushed.isError).toBeFalsy();
    const memory = data(pushed).memory;
    expect(memory).toMatchObject({ hub_id: teamHubId, source: "mcp", tags: ["ops"] });
    expect(text(pushed)).toContain(memory.id);
    await indexMemories(h.db, [memory.id]);

    const recalled = await client.callTool({ name: "engram_recall", arguments: { query: `how do we deploy zephyr ${tag}` } });
    expect(recalled.isError).toBeFalsy();
    expect(data(recalled).memories[0].id).toBe(memory.id);
    expect(text(recalled)).toMatch(new RegExp(`1\\. \\*\\*Deploys ${tag}\\*\\* — \\w+, score \\d\\.\\d\\d, just now, hub Team \\d+, id \`${memory.id}\``));
    expect(text(recalled)).toContain("> We deploy the zephyr service");
    // The same query over REST finds the same memory first: one implementation.
    const rest = await ann.post("/v1/recall", { query: `how do we deploy zephyr ${tag}` });
    expect(rest.body.data.memories[0].id).toBe(memory.id);

    const got = await client.callTool({ name: "engram_get", arguments: { id: memory.id } });
    expect(text(got)).toContain("blue-green switches");
    expect(data(got).memory.content).toContain("zephyr");
    expect(data(got).url).toBe(`${server.url}/memories/${memory.id}`);

    const forgot = await client.callTool({ name: "engram_forget", arguments: { id: memory.id } });
    expect(data(forgot)).toEqual({ id: memory.id, deleted: true });
    expect((await ann.get(`/v1/memories/${memory.id}`)).status).toBe(404);
    const gone = await client.callTool({ name: "engram_get", arguments: { id: memory.id } });
    expect(gone.isError).toBe(true);
    expect(data(gone).error.code).toBe("not_found");
  });

  it.skipIf(testPostgres())("engram_get reads a memory's text once and engram_forget not at all", async () => {
    const client = await connect(ann.key);
    const content = `# Survey\n\n${"The reed beds were counted again. ".repeat(30_000)}`;
    const id = (await ann.post("/v1/memories", { content })).body.data.id;
    let got: Result | undefined;
    const getting = await charactersRead(h.database, async () => {
      got = await client.callTool({ name: "engram_get", arguments: { id } });
    });
    // The first page of the text (engram_get reads at most MAX_READ_CHARS at a time), from one read of the whole row.
    expect(data(got!).memory.content).toBe(content.slice(0, MAX_READ_CHARS));
    expect(data(got!).content_length).toBe(content.length);
    // The reach check before the read loaded the whole text too: twice its length.
    expect(getting).toBeLessThan(content.length * 1.5);
    let forgot: Result | undefined;
    const forgetting = await charactersRead(h.database, async () => {
      forgot = await client.callTool({ name: "engram_forget", arguments: { id } });
    });
    expect(data(forgot!)).toEqual({ id, deleted: true });
    expect(forgetting).toBeLessThan(50_000);
  });

  it("recall quotes a chunk with a long run of spaces before a line break in linear time (ReDoS)", async () => {
    const client = await connect(ann.key);
    const tag = randomBytes(4).toString("hex");
    // The excerpt's whitespace regex rescanned the run from each of its tabs: half a minute per recall.
    const content = `Zephyr rollouts ${tag}: we roll out the zephyr service${"\t".repeat(300_000)}slowly \t \n  and carefully.`;
    const pushed = await client.callTool({ name: "engram_push", arguments: { content, hub_id: teamSlug } });
    expect(pushed.isError).toBeFalsy();
    await indexMemories(h.db, [data(pushed).memory.id]);
    const started = performance.now();
    const recalled = await client.callTool({ name: "engram_recall", arguments: { query: `zephyr rollouts ${tag}` } });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(data(recalled).memories[0].id).toBe(data(pushed).memory.id);
    // Cut at 600 characters, inside the run, which the cut then trims.
    expect(text(recalled)).toContain(`> Zephyr rollouts ${tag}: we roll out the zephyr service…\n`);
  });

  it("recall clamps a limit over 50 to 50, as POST /v1/recall does, and lists no maximum of 50 for it", async () => {
    const dana = await h.user("Dana");
    const tag = randomBytes(4).toString("hex");
    const ids: string[] = [];
    for (let i = 0; i < 52; i++) {
      const res = await dana.post("/v1/memories", { content: `Heron survey ${tag} station ${i}: heron nests counted along the reed bank.` });
      expect(res.status).toBe(201);
      ids.push(res.body.data.id);
    }
    await indexMemories(h.db, ids);
    const client = await connect(dana.key);
    const listed = (await client.listTools()).tools.find((t) => t.name === "engram_recall")!;
    // A client that checks arguments against the listed schema must not refuse what the tool clamps.
    expect((listed.inputSchema.properties as Record<string, { maximum?: number }>).limit!.maximum ?? Infinity).toBeGreaterThan(50);
    const rest = await dana.post("/v1/recall", { query: `heron survey ${tag}`, limit: 80 });
    expect(rest.body.data.memories).toHaveLength(50);
    const recalled = await client.callTool({ name: "engram_recall", arguments: { query: `heron survey ${tag}`, limit: 80 } });
    expect(recalled.isError, text(recalled)).toBeFalsy();
    expect(data(recalled).memories).toHaveLength(50);
  });

  it("lists with a cursor", async () => {
    const carol = await h.user("Carol");
    for (let i = 0; i < 5; i++) expect((await carol.post("/v1/memories", { content: `list item ${i} ${randomBytes(3).toString("hex")}` })).status).toBe(201);
    const client = await connect(carol.key);
    const first = await client.callTool({ name: "engram_list", arguments: { limit: 2 } });
    expect(data(first).memories).toHaveLength(2);
    expect(data(first).has_more).toBe(true);
    expect(data(first).total).toBe(5);
    expect(text(first)).toContain(data(first).next_cursor);
    const seen = new Set(data(first).memories.map((m: { id: string }) => m.id));
    let cursor = data(first).next_cursor;
    while (cursor) {
      const next = await client.callTool({ name: "engram_list", arguments: { limit: 2, cursor } });
      for (const m of data(next).memories) seen.add(m.id);
      cursor = data(next).next_cursor;
    }
    expect(seen.size).toBe(5);
    const bad = await client.callTool({ name: "engram_list", arguments: { cursor: "forged.cursor" } });
    expect(bad.isError).toBe(true);
    expect(data(bad).error.code).toBe("invalid_cursor");

    // A cursor belongs to its list: the hint names the arguments to send again with it, and they work.
    const hub = await h.teamHub(carol);
    for (let i = 0; i < 3; i++) expect((await carol.post("/v1/memories", { content: `team item ${i} ${randomBytes(3).toString("hex")}` }, { headers: { "x-hub-id": hub } })).status).toBe(201);
    const inHub = await client.callTool({ name: "engram_list", arguments: { limit: 2, hub_id: hub, sort: "newest" } });
    expect(text(inHub)).toContain(`call again with cursor "${data(inHub).next_cursor}" and the same hub_id "${hub}", sort "newest".`);
    const rest = await client.callTool({ name: "engram_list", arguments: { limit: 2, hub_id: hub, sort: "newest", cursor: data(inHub).next_cursor } });
    expect(rest.isError).toBeFalsy();
    expect(data(rest).memories).toHaveLength(1);
    expect(data((await client.callTool({ name: "engram_list", arguments: { limit: 2, cursor: data(inHub).next_cursor } }))).error.code).toBe("invalid_cursor");
  });

  it("engram_topics without hub_id lists every tree only up to 10 hubs; past that it asks for hub_id, and a topic_id still finds its one tree", async () => {
    const tia = await h.user("Tia");
    const hubIds = [];
    for (let i = 0; i < 10; i++) hubIds.push(await h.teamHub(tia));
    const topic = (await tia.post("/v1/topics", { name: "Onboarding", hub_id: hubIds[9] })).body.data;
    const client = await connect(tia.key);
    // Ten team hubs and the personal one: eleven trees.
    const all = await client.callTool({ name: "engram_topics", arguments: {} });
    expect(data(all).error).toMatchObject({ code: "invalid_request" });
    expect(text(all)).toContain("pass hub_id");
    expect(text(await client.callTool({ name: "engram_topics", arguments: { hub_id: hubIds[9] } }))).toContain("Onboarding");
    const one = await client.callTool({ name: "engram_topics", arguments: { topic_id: topic.id } });
    expect(data(one).topic).toMatchObject({ id: topic.id, name: "Onboarding" });
    // A topic in a hub out of reach is not found, as one that does not exist.
    const other = (await ann.post("/v1/topics", { name: "Secret plans", hub_id: teamHubId })).body.data;
    const hidden = await client.callTool({ name: "engram_topics", arguments: { topic_id: other.id } });
    expect(data(hidden).error).toEqual({ code: "not_found", message: "Topic not found" });
    // Within the bound every tree is still listed at once.
    await tia.delete(`/v1/hubs/${hubIds[0]}`);
    const listed = await client.callTool({ name: "engram_topics", arguments: {} });
    expect(data(listed).hubs).toHaveLength(10);
    expect(text(listed)).toContain("Onboarding");
  });

  it("engram_topics with a topic_id past its first 50 memories says how to get the rest, and that call works", async () => {
    const hal = await h.user("Hal");
    const topic = (await hal.post("/v1/topics", { name: "Incidents", hub_id: hal.personalHubId })).body.data;
    const ids: string[] = [];
    for (let i = 0; i < 52; i++) ids.push((await hal.post("/v1/memories", { content: `incident ${i} ${randomBytes(4).toString("hex")}` })).body.data.id);
    await h.db.memory.updateMany({ where: { id: { in: ids } }, data: { topicId: topic.id } });
    const client = await connect(hal.key);
    const first = await client.callTool({ name: "engram_topics", arguments: { topic_id: topic.id } });
    expect(first.isError, text(first)).toBeFalsy();
    expect(data(first).memories).toHaveLength(50);
    expect(data(first)).toMatchObject({ total: 52, has_more: true });
    const cursor = data(first).next_cursor;
    expect(text(first)).toContain(`More: call engram_list with topic_id "${topic.id}", hub_id "${hal.personalHubId}", sort "newest" and cursor "${cursor}".`);
    const rest = await client.callTool({ name: "engram_list", arguments: { topic_id: topic.id, hub_id: hal.personalHubId, sort: "newest", cursor } });
    expect(rest.isError, text(rest)).toBeFalsy();
    expect(data(rest).has_more).toBe(false);
    expect(new Set([...data(first).memories, ...data(rest).memories].map((m: { id: string }) => m.id))).toEqual(new Set(ids));
  });

  it("hubs, members, topics and capture; hub_id takes an id, a slug or personal", async () => {
    const client = await connect(ann.key);
    const hubs = data(await client.callTool({ name: "engram_hubs", arguments: {} })).hubs.map((x: any) => x.hub.id);
    expect(hubs).toEqual(expect.arrayContaining([ann.personalHubId, teamHubId]));
    expect(hubs).not.toContain(bobHubId);
    const members = await client.callTool({ name: "engram_hub_members", arguments: { hub_id: teamSlug } });
    expect(text(members)).toContain("Ann");
    // Slugs are lower case; a model that capitalises one ("My-Team") still names the same hub.
    const shouted = await client.callTool({ name: "engram_hub_members", arguments: { hub_id: teamSlug.toUpperCase() } });
    expect(shouted.isError).toBeFalsy();
    expect(text(shouted)).toContain("Ann");
    expect((await ann.post("/v1/topics", { name: "Runbooks", hub_id: teamHubId })).status).toBe(201);
    const topics = await client.callTool({ name: "engram_topics", arguments: { hub_id: teamHubId } });
    expect(text(topics)).toContain("Runbooks");
    const capture = await client.callTool({ name: "engram_capture", arguments: { summary: "Moved CI to arm runners", decisions: ["Use arm64"], learnings: ["Builds are 30% faster"] } });
    const captured = data(capture).memory;
    expect(captured).toMatchObject({ hub_id: ann.personalHubId, tags: ["session-capture"] });
    const full = data(await client.callTool({ name: "engram_get", arguments: { id: captured.id } })).memory.content;
    expect(full).toContain("## Decisions\n\n-   Use arm64");
    expect(full).toContain("## Learnings\n\n-   Builds are 30% faster");
    const personal = await client.callTool({ name: "engram_push", arguments: { content: `personal ${randomBytes(3).toString("hex")}`, hub_id: "personal" } });
    expect(data(personal).memory.hub_id).toBe(ann.personalHubId);
  });

  it("engram_hub_members pages with a cursor, so every member of a large hub can be reached", async () => {
    const dan = await h.user("Dan");
    const eve = await h.user("Eve");
    const hubId = await h.teamHub(ann, [[dan, "viewer"], [eve, "contributor"]]);
    const client = await connect(ann.key);
    const first = await client.callTool({ name: "engram_hub_members", arguments: { hub_id: hubId, limit: 2 } });
    expect(first.isError).toBeFalsy();
    expect(data(first).members).toHaveLength(2);
    expect(data(first).has_more).toBe(true);
    expect(text(first)).toContain(data(first).next_cursor);
    const second = await client.callTool({ name: "engram_hub_members", arguments: { hub_id: hubId, limit: 2, cursor: data(first).next_cursor } });
    expect(data(second).has_more).toBe(false);
    const names = [...data(first).members, ...data(second).members].map((m: { name: string }) => m.name);
    expect(names.sort()).toEqual(["Ann", "Dan", "Eve"]);
    // A cursor is the hub's own: another hub's page is not continued with it.
    const foreign = await client.callTool({ name: "engram_hub_members", arguments: { hub_id: teamHubId, cursor: data(first).next_cursor } });
    expect(data(foreign).error.code).toBe("invalid_cursor");
  });

  it("recalls, pushes and captures count in /v1/usage as their REST requests do", async () => {
    const fay = await h.user("Fay");
    const client = await connect(fay.key);
    expect((await client.callTool({ name: "engram_recall", arguments: { query: "anything at all" } })).isError).toBeFalsy();
    expect((await client.callTool({ name: "engram_push", arguments: { content: `usage ${randomBytes(4).toString("hex")}` } })).isError).toBeFalsy();
    expect((await client.callTool({ name: "engram_capture", arguments: { summary: `usage session ${randomBytes(4).toString("hex")}` } })).isError).toBeFalsy();
    const usage = (await fay.get("/v1/usage")).body.data;
    expect(usage).toMatchObject({ recall_count: 1, push_count: 2 });
  });

  it("accepts memax_* names on tools/call", async () => {
    const client = await connect(ann.key);
    const res = await client.callTool({ name: "memax_hubs", arguments: {} });
    expect(res.isError).toBeFalsy();
    expect(data(res).hubs.length).toBeGreaterThan(0);
  });

  it("accepts memax_* names on the 2026-07-28 revision too, whose Mcp-Name header names the alias", async () => {
    const modern = await connect(ann.key, { negotiation: "auto" });
    const res = await modern.callTool({ name: "memax_hubs", arguments: {} });
    expect(res.isError).toBeFalsy();
    expect(data(res).hubs.length).toBeGreaterThan(0);
    const MODERN_META = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
      "io.modelcontextprotocol/clientCapabilities": {},
    };
    // The header still has to agree with the body: one naming another tool is refused as before.
    const mismatched = await raw(
      { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "memax_hubs", arguments: {}, _meta: MODERN_META } },
      { "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "memax_list" },
    );
    expect(mismatched.status).toBe(400);
    expect(mismatched.body.error.message).toContain('the Mcp-Name header names "engram_list"');
  });

  it("never reaches a hub the credential cannot, and errors are isError results", async () => {
    const secret = `bob-only ${randomBytes(4).toString("hex")} quasar`;
    const bobMemory = (await bob.post("/v1/memories", { content: secret }, { headers: { "x-hub-id": bobHubId } })).body.data;
    await indexMemories(h.db, [bobMemory.id]);
    const client = await connect(ann.key);
    const attempts: [string, Record<string, unknown>][] = [
      ["engram_get", { id: bobMemory.id }],
      ["engram_forget", { id: bobMemory.id }],
      ["engram_push", { content: "intrusion", hub_id: bobHubId }],
      ["engram_list", { hub_id: bobHubId }],
      ["engram_hub_members", { hub_id: bobHubId }],
      ["engram_topics", { hub_id: bobHubId }],
      ["memax_get", { id: bobMemory.id }],
    ];
    for (const [name, args] of attempts) {
      const res = await client.callTool({ name, arguments: args });
      expect(res.isError, name).toBe(true);
      expect(data(res).error.code, name).toBe("not_found");
      expect(JSON.stringify(res)).not.toContain(secret);
    }
    const recall = await client.callTool({ name: "engram_recall", arguments: { query: secret, hub_id: bobHubId } });
    expect(recall.isError).toBe(true);
    const recallAll = await client.callTool({ name: "engram_recall", arguments: { query: secret } });
    expect(JSON.stringify(recallAll)).not.toContain(bobMemory.id);
    expect((await bob.get(`/v1/memories/${bobMemory.id}`)).status).toBe(200);

    // Role checks hold too: a viewer cannot push into the hub.
    const viewerHub = await h.teamHub(bob, [[ann, "viewer"]]);
    const viewerPush = await client.callTool({ name: "engram_push", arguments: { content: "viewer push", hub_id: viewerHub } });
    expect(data(viewerPush).error.code).toBe("forbidden");
    // Bad arguments are tool errors too, not transport failures, with the REST code and the field like every other failure.
    const invalid = await client.callTool({ name: "engram_recall", arguments: { query: "" } });
    expect(invalid.isError).toBe(true);
    expect(data(invalid).error).toMatchObject({ code: "invalid_request", message: expect.stringContaining("query: Too small") });
    expect(text(invalid)).toContain("Error (invalid_request):");
    const badLimit = await client.callTool({ name: "engram_list", arguments: { limit: 0 } });
    expect(data(badLimit).error).toMatchObject({ code: "invalid_request", message: expect.stringContaining("limit:") });
    // decisions.md: a list's limit over 100 is clamped, not refused (as REST does); MCP refused it with invalid_request.
    const overLimit = await client.callTool({ name: "engram_list", arguments: { limit: 1000 } });
    expect(overLimit.isError, text(overLimit)).toBeFalsy();
    expect(data(overLimit).memories).toEqual(expect.any(Array));
    const overMembers = await client.callTool({ name: "engram_hub_members", arguments: { hub_id: "personal", limit: 1000 } });
    expect(overMembers.isError, text(overMembers)).toBeFalsy();
    expect(data(overMembers).members).toHaveLength(1);
    // A client that checks arguments against the listed schema must not refuse what the tool clamps.
    const listed = (await client.listTools()).tools.filter((t) => t.name === "engram_list" || t.name === "engram_hub_members");
    for (const tool of listed) expect((tool.inputSchema.properties as Record<string, { maximum?: number }>).limit!.maximum ?? Infinity).toBeGreaterThan(100);
    const unknownHub = await client.callTool({ name: "engram_push", arguments: { content: "x", hub_id: "no-such-slug" } });
    expect(text(unknownHub)).toContain("Error (not_found): Hub not found");
  });
});

describe("NUL characters", () => {
  it("a NUL in any tool argument is an invalid_request tool error, never an internal one, and nothing is written", async () => {
    const client = await connect(ann.key);
    const before = await h.db.memory.count({ where: { hubId: ann.personalHubId } });
    const attempts: [string, Record<string, unknown>][] = [
      ["engram_push", { content: "nul \u0000 inside" }],
      ["engram_push", { content: "fine", title: "bad\u0000title" }],
      ["engram_push", { content: "fine", tags: ["a\u0000b"] }],
      ["engram_capture", { summary: "done\u0000" }],
      ["engram_list", { hub_id: "per\u0000sonal" }],
      ["engram_recall", { query: "deploy\u0000" }],
    ];
    for (const [name, args] of attempts) {
      const res = await client.callTool({ name, arguments: args });
      expect(res.isError, name).toBe(true);
      expect(data(res).error.code, name).toBe("invalid_request");
      expect(text(res), name).toContain("NUL");
    }
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(before);
  });
});

describe("half a surrogate pair", () => {
  // JSON may escape half a UTF-16 surrogate pair ("\ud800"), which no UTF-8 text holds: REST reads it as
  // U+FFFD (lib/api/parse.ts wellFormed), but MCP parsed tool arguments itself and a tag or a title
  // reached the database as it was and failed there, an internal error.
  it("in a tool argument is read as U+FFFD, as on REST, and the push is stored", async () => {
    const client = await connect(ann.key);
    for (const name of ["engram_push", "memax_push"]) {
      const tag = `${name}-${randomBytes(4).toString("hex")}`;
      const res = await client.callTool({ name, arguments: { content: `Half a pair from ${tag}.`, title: `Title \ud800 ${tag}`, tags: [`${tag}\udc00`] } });
      expect(res.isError, `${name}: ${text(res)}`).toBeFalsy();
      const stored = await h.db.memory.findFirstOrThrow({ where: { hubId: ann.personalHubId, content: `Half a pair from ${tag}.` } });
      expect(stored.title).toBe(`Title \ufffd ${tag}`);
      expect(stored.tags).toEqual([`${tag}\ufffd`]);
    }
  });
});

describe("engram_ask", () => {
  it("answers from the same domain function as POST /v1/ask, citing its sources, and reaches only the credential's hubs", async () => {
    const tag = randomBytes(4).toString("hex");
    const team = (await ann.post("/v1/memories", { title: `Backups ${tag}`, content: `The orion database ${tag} is backed up every night at 02:00 UTC to the cold bucket. Restores take about twenty minutes.` }, { headers: { "x-hub-id": teamHubId } })).body.data;
    const personal = (await ann.post("/v1/memories", { title: `Orion notes ${tag}`, content: `My personal note: the orion database ${tag} backup window is 02:00 UTC at night.` })).body.data;
    const bobSecret = (await bob.post("/v1/memories", { title: `Bob ${tag}`, content: `Bob's orion database ${tag} backup secret runs at 03:00 UTC every night.` }, { headers: { "x-hub-id": bobHubId } })).body.data;
    await indexMemories(h.db, [team.id, personal.id, bobSecret.id]);
    const query = `When is the orion database ${tag} backed up?`;

    const client = await connect(ann.key);
    const asked = await client.callTool({ name: "engram_ask", arguments: { query } });
    expect(asked.isError).toBeFalsy();
    const result = data(asked);
    expect(result.metadata.model).toBe("extractive");
    expect(result.answer).toMatch(/02:00 UTC.*\[\d\]/s);
    expect(result.citations.length).toBeGreaterThan(0);
    const citedIds = result.citations.map((c: { memory_id: string }) => c.memory_id);
    expect(citedIds.every((id: string) => [team.id, personal.id].includes(id))).toBe(true);
    expect(text(asked)).toContain(result.answer);
    expect(text(asked)).toMatch(new RegExp(`\\[\\d\\] \\*\\*(Backups|Orion notes) ${tag}\\*\\*`));
    for (const id of citedIds) expect(text(asked)).toContain(`id \`${id}\``);
    expect(JSON.stringify(asked)).not.toContain(bobSecret.id);
    // One implementation: REST answers the same question the same way.
    const rest = await ann.post("/v1/ask", { query });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body.data.answer).toBe(result.answer);
    expect(rest.body.data.sources.map((m: { id: string }) => m.id)).toEqual(result.sources.map((m: { id: string }) => m.id));

    // A key limited to the team hub answers from that hub only; hub_id outside it is not found.
    const limited = await ann.post("/v1/auth/api-keys", { name: "mcp ask team", hub_ids: [teamHubId], scopes: ["read"] });
    const agent = await connect(limited.body.data.key);
    const scoped = data(await agent.callTool({ name: "engram_ask", arguments: { query } }));
    expect(scoped.sources.length).toBeGreaterThan(0);
    const scopedIds = scoped.sources.map((m: { id: string }) => m.id);
    expect(scopedIds).toContain(team.id);
    expect(await h.db.memory.count({ where: { id: { in: scopedIds }, hubId: { not: teamHubId } } })).toBe(0);
    const outside = await agent.callTool({ name: "engram_ask", arguments: { query, hub_id: "personal" } });
    expect(outside.isError).toBe(true);
    expect(data(outside).error.code).toBe("not_found");
    const foreign = await client.callTool({ name: "engram_ask", arguments: { query, hub_id: bobHubId } });
    expect(data(foreign).error.code).toBe("not_found");

    // Nothing relevant: it says so rather than inventing an answer.
    const nothing = data(await client.callTool({ name: "engram_ask", arguments: { query: `zzyzx quokka ${randomBytes(6).toString("hex")}` } }));
    expect(nothing.answer).toMatch(/could not find/);
    expect(nothing.citations).toEqual([]);
    // Bad arguments are tool errors; the alias works; usage counts the asks.
    expect((await client.callTool({ name: "engram_ask", arguments: { query: "" } })).isError).toBe(true);
    expect((await client.callTool({ name: "memax_ask", arguments: { query } })).isError).toBeFalsy();
    const usage = (await ann.get("/v1/usage")).body.data;
    expect(usage.ask_count).toBeGreaterThanOrEqual(4);
  });
});

describe("engram_ask's limit", () => {
  it("clamps a limit over 50 to 50, as POST /v1/ask does, and lists no maximum of 50 for it", async () => {
    const erin = await h.user("Erin");
    const tag = randomBytes(4).toString("hex");
    const ids: string[] = [];
    for (let i = 0; i < 52; i++) {
      const res = await erin.post("/v1/memories", { content: `Kestrel survey ${tag} tower ${i}: kestrel pairs counted along the ridge.` });
      expect(res.status).toBe(201);
      ids.push(res.body.data.id);
    }
    await indexMemories(h.db, ids);
    const query = `How many kestrel pairs did the kestrel survey ${tag} count?`;
    const client = await connect(erin.key);
    const listed = (await client.listTools()).tools.find((t) => t.name === "engram_ask")!;
    expect((listed.inputSchema.properties as Record<string, { maximum?: number }>).limit!.maximum ?? Infinity).toBeGreaterThan(50);
    const rest = await erin.post("/v1/ask", { query, limit: 80 });
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body.data.sources).toHaveLength(50);
    const asked = await client.callTool({ name: "engram_ask", arguments: { query, limit: 80 } });
    expect(asked.isError, text(asked)).toBeFalsy();
    expect(data(asked).sources).toHaveLength(50);
  });
});

describe("API key scopes and hub restrictions (the one hub-access resolver)", () => {
  it("a read-only key reads but cannot write; a hub-limited key reaches only its hubs", async () => {
    const readOnly = await ann.post("/v1/auth/api-keys", { name: "mcp read", scopes: ["read"] });
    expect(readOnly.status).toBe(201);
    const reader = await connect(readOnly.body.data.key);
    expect((await reader.callTool({ name: "engram_hubs", arguments: {} })).isError).toBeFalsy();
    const push = await reader.callTool({ name: "engram_push", arguments: { content: "read-only push" } });
    expect(push.isError).toBe(true);
    expect(data(push).error.code).toBe("forbidden");

    const personal = (await ann.post("/v1/memories", { content: `personal only ${randomBytes(4).toString("hex")}` })).body.data;
    expect((await ann.post("/v1/memories", { content: `team ${randomBytes(4).toString("hex")}` }, { headers: { "x-hub-id": teamHubId } })).status).toBe(201);
    const limited = await ann.post("/v1/auth/api-keys", { name: "mcp team", hub_ids: [teamHubId] });
    expect(limited.status).toBe(201);
    const agent = await connect(limited.body.data.key);
    const hubs = data(await agent.callTool({ name: "engram_hubs", arguments: {} })).hubs.map((x: any) => x.hub.id);
    expect(hubs).toEqual([teamHubId]);
    const got = await agent.callTool({ name: "engram_get", arguments: { id: personal.id } });
    expect(data(got).error.code).toBe("not_found");
    const intoPersonal = await agent.callTool({ name: "engram_push", arguments: { content: "x", hub_id: "personal" } });
    expect(data(intoPersonal).error.code).toBe("not_found");
    const listed = await agent.callTool({ name: "engram_list", arguments: {} });
    expect(new Set(data(listed).memories.map((m: { hub_id: string }) => m.hub_id))).toEqual(new Set([teamHubId]));
  });

  it("engram_list without hub_id lists every hub of a key limited to several, as GET /v1/memories does", async () => {
    const gus = await h.user("Gus");
    const team = await h.teamHub(gus);
    const other = await h.teamHub(gus);
    const ids = [];
    for (const hub of [gus.personalHubId, team, other]) {
      ids.push((await gus.post("/v1/memories", { content: `limited list ${randomBytes(4).toString("hex")}` }, { headers: { "x-hub-id": hub } })).body.data.id);
    }
    const key = await gus.post("/v1/auth/api-keys", { name: "two hubs", hub_ids: [gus.personalHubId, team] });
    expect(key.status).toBe(201);
    const rest = await fetch(`${server.url}/v1/memories`, { headers: { authorization: `Bearer ${key.body.data.key}` } });
    const restIds = ((await rest.json()) as any).data.memories.map((m: { id: string }) => m.id);
    expect(restIds.sort()).toEqual(ids.slice(0, 2).sort());

    const agent = await connect(key.body.data.key);
    const first = await agent.callTool({ name: "engram_list", arguments: { limit: 1 } });
    expect(first.isError, text(first)).toBeFalsy();
    expect(data(first)).toMatchObject({ total: 2, has_more: true });
    const second = await agent.callTool({ name: "engram_list", arguments: { limit: 1, cursor: data(first).next_cursor } });
    expect(second.isError, text(second)).toBeFalsy();
    expect([...data(first).memories, ...data(second).memories].map((m: { id: string }) => m.id).sort()).toEqual(restIds.sort());
    expect(data(second).has_more).toBe(false);
  });
});

describe("/mcp/chatgpt", () => {
  it("search returns one text item of results with dashboard urls; fetch returns the document", async () => {
    const tag = randomBytes(4).toString("hex");
    const memory = (await ann.post("/v1/memories", { title: `Chat ${tag}`, content: `The nebula pipeline ${tag} retries three times.` })).body.data;
    await indexMemories(h.db, [memory.id]);
    const client = await connect(ann.key, { path: "/mcp/chatgpt" });
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(["search", "fetch", "save_memory", "list_memories", "delete_memory", "list_hubs", "ask"]));
    const found = await client.callTool({ name: "search", arguments: { query: `nebula pipeline ${tag}` } });
    expect(found.content).toHaveLength(1);
    const results = JSON.parse(text(found)).results;
    expect(results[0]).toEqual({ id: memory.id, title: `Chat ${tag}`, url: `${server.url}/memories/${memory.id}` });
    const fetched = await client.callTool({ name: "fetch", arguments: { id: memory.id } });
    const doc = JSON.parse(text(fetched));
    expect(doc).toMatchObject({ id: memory.id, title: `Chat ${tag}`, url: `${server.url}/memories/${memory.id}` });
    expect(doc.text).toContain("retries three times");
    expect(doc.metadata.hub_id).toBe(ann.personalHubId);
  });
});

describe("database conditions in a tool", () => {
  it.skipIf(!testPostgres())("a connection the server drops mid-call is the tool error unavailable (as REST's 503), not internal", async () => {
    const memory = (await ann.post("/v1/memories", { title: "Held", content: "A memory another transaction holds." })).body.data;
    const holder = new pg.Client({ connectionString: h.url! });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT 1 FROM memories WHERE id = $1 FOR UPDATE", [memory.id]);
      const call = raw({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "engram_forget", arguments: { id: memory.id } } }, { "mcp-protocol-version": "2025-03-26" });
      let blocked: number | undefined;
      for (let waited = 0; blocked === undefined; waited += 20) {
        const { rows } = await holder.query("SELECT l.pid FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid)) LIMIT 1");
        blocked = rows[0]?.pid;
        if (waited > 20_000) throw new Error("engram_forget never waited for the held row");
        if (blocked === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // A restart or failover as the tool's statement sees it: 57P01, the connection gone.
      await holder.query("SELECT pg_terminate_backend($1)", [blocked]);
      const res = await call;
      expect(res.status).toBe(200);
      expect(res.body.result.isError).toBe(true);
      expect(res.body.result.structuredContent.error.code).toBe("unavailable");
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
    }
    expect(await h.db.memory.count({ where: { id: memory.id } })).toBe(1);
  });
});
