import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { inject } from "vitest";
import { eventually, memax, pushProcessed, scratchHome, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

// `memax mcp serve`, Memax's local stdio MCP server, unchanged: an MCP client (the SDK's own)
// calls each of its tools, which reach Engram through Memax's SDK. What they did is checked
// through the API behind the server's back.

let engram: Engram;
let ann: EngramUser;
let client: Client;
let team: string;

function text(result: unknown): string {
  const content = (result as { content: { type: string; text: string }[] }).content;
  return content.map((c) => c.text).join("\n");
}

async function call(name: string, args: Record<string, unknown> = {}) {
  const result = (await client.callTool({ name, arguments: args })) as { isError?: boolean };
  return { error: result.isError === true, text: text(result) };
}

beforeAll(async () => {
  engram = await startEngram();
  ann = await engram.user("Ann");
  team = (await ann.api("POST", "/v1/hubs", { name: "Platform" })).body.data.id;
  await pushProcessed(ann, ["# Deploy days\n\nWe deploy the billing service on Tuesdays with blue-green switches."]);
  const home = scratchHome();
  // As after `memax login`: an active hub. (With none set, the CLI passes "" as the hub reference,
  // which memax_request_decision cannot resolve: a Memax CLI bug, not a server answer.)
  const switched = await memax(engram, ["hub", "switch", "personal"], { key: ann.key, home });
  expect(switched.code, switched.stderr).toBe(0);
  client = new Client({ name: "compat", version: "1.0.0" });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [inject("memaxCli"), "mcp", "serve", "--agent", "claude-code"],
      cwd: home,
      env: { PATH: process.env.PATH ?? "", HOME: home, MEMAX_API_URL: engram.url, MEMAX_API_KEY: ann.key, NO_COLOR: "1" },
      stderr: "pipe",
    }),
  );
});
afterAll(async () => {
  await client?.close();
  await engram?.stop();
});

describe("memax mcp serve", () => {
  it("lists its tools", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(["memax_recall", "memax_push", "memax_get", "memax_list", "memax_hubs", "memax_hub_members", "memax_forget", "memax_capture", "memax_request_decision", "memax_topics"]),
    );
  });

  it("recalls, pushes, gets, lists and forgets", async () => {
    const recalled = await call("memax_recall", { query: "when do we deploy billing?" });
    expect(recalled.error, recalled.text).toBe(false);
    expect(recalled.text).toContain("Deploy days");
    const pushed = await call("memax_push", { content: "# Release freeze\n\nNo deploys during the last week of December.", tags: ["ops"] });
    expect(pushed.error, pushed.text).toBe(false);
    const id = pushed.text.match(/id: ([0-9a-f-]{36})/)?.[1];
    expect(id).toBeDefined();
    const stored = (await ann.api("GET", `/v1/memories/${id}`)).body.data;
    expect(stored).toMatchObject({ title: "Release freeze", source: "mcp", source_agent: "claude-code", tags: ["ops"] });
    const got = await call("memax_get", { id });
    expect(got.text).toContain("No deploys during the last week of December.");
    // memax_get signals the read; it counts once.
    await eventually(async () => (await ann.api("GET", `/v1/memories/${id}`)).body.data.access_count >= 1, 10_000, "access counted");
    const listed = await call("memax_list", { limit: 5 });
    expect(listed.text).toContain("Release freeze");
    const forgotten = await call("memax_forget", { id });
    expect(forgotten.error, forgotten.text).toBe(false);
    expect((await ann.api("GET", `/v1/memories/${id}`)).status).toBe(404);
  });

  it("lists hubs, members and topics", async () => {
    const hubs = await call("memax_hubs");
    expect(hubs.text).toContain("Platform");
    const members = await call("memax_hub_members", { hub_id: team });
    expect(members.error, members.text).toBe(false);
    expect(members.text).toContain("Ann");
    await ann.api("POST", "/v1/topics", { name: "Runbooks" }, { "x-hub-id": team });
    const topics = await call("memax_topics", { hub_id: team });
    expect(topics.error, topics.text).toBe(false);
    expect(topics.text).toContain("Runbooks");
  });

  it("captures a session, and each decision and learning as a memory of its own", async () => {
    const captured = await call("memax_capture", { summary: "Moved the cache to Redis", decisions: ["Chose Redis over Memcached for persistence"], learnings: ["Redis needs maxmemory-policy set"] });
    expect(captured.error, captured.text).toBe(false);
    const id = captured.text.match(/id: ([0-9a-f-]{36})/)?.[1];
    const stored = (await ann.api("GET", `/v1/memories/${id}`)).body.data;
    expect(stored).toMatchObject({ source: "mcp/capture", source_agent: "claude-code", content_type: "transcript" });
    expect(stored.content).toContain("- Chose Redis over Memcached for persistence");
    // As the tool tells the agent: each decision and learning is a memory of its own.
    const list = (await ann.api("GET", "/v1/memories?limit=100")).body.data.memories as { title: string; source: string; tags: string[] }[];
    const facts = list.filter((m) => m.source === "extraction").map((m) => [m.title, m.tags]);
    expect(facts).toEqual(
      expect.arrayContaining([
        ["Chose Redis over Memcached for persistence", ["session-capture", "decision"]],
        ["Redis needs maxmemory-policy set", ["session-capture", "learning"]],
      ]),
    );
  });

  it("asks the person to decide: a board card and a pending notification, answered into a memory", async () => {
    const asked = await call("memax_request_decision", { question: "Which queue for the importer?", options: ["Inngest", "A cron job"], context: "Imports run hourly." });
    expect(asked.error, asked.text).toBe(false);
    const slotKey = asked.text.match(/id: (decision:[0-9a-f-]{36})/)?.[1];
    expect(slotKey).toBeDefined();
    const board = (await ann.api("GET", `/v1/hubs/${ann.personalHubId}/board`)).body.data;
    expect(board.slots[0]).toMatchObject({ slot_key: slotKey, state: "fresh", payload: { source_agent: "claude-code", context: "Imports run hourly." } });
    const rows = (await ann.api("GET", "/v1/notifications?status=pending")).body.data.notifications as { id: string; kind: string }[];
    const row = rows.find((n) => n.kind === "decision_gate")!;
    expect((await ann.api("POST", `/v1/notifications/${row.id}/resolve`, { action: "1" })).status).toBe(200);
    const answered = (await ann.api("GET", `/v1/hubs/${ann.personalHubId}/board`)).body.data.slots[0];
    const memory = (await ann.api("GET", `/v1/memories/${answered.cite_memory_ids[0]}`)).body.data;
    expect(memory.content).toContain("Chosen: **Inngest**");
    // The agent finds the answer the way the tool tells it to: recall with the question's words.
    await eventually(async () => (await call("memax_recall", { query: "which queue for the importer" })).text.includes("Decision: Which queue"), 60_000, "the decision recalled");
  });

  it("keeps the tool's own check on options", async () => {
    const refused = await call("memax_request_decision", { question: "Only one?", options: ["yes"] });
    expect(refused.error).toBe(true);
  });
});
