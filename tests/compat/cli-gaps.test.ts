import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, memax, scratchHome, startEngram, type CliResult, type Engram, type EngramUser } from "./support/engram.ts";

// Memax CLI commands and flags no other compat file runs: topic archive/restore/archived/clear,
// hub invite revoke/regenerate, capture-session, agents configs list/delete, and the list,
// recall, push and dreams flags. Each is checked by what the CLI prints and what the server holds.

let engram: Engram;
let ann: EngramUser;
const home = scratchHome();

beforeAll(async () => {
  engram = await startEngram();
  ann = await engram.user("Ann");
});
afterAll(async () => {
  await engram?.stop();
});

async function run(args: string[], options: { stdin?: string } = {}): Promise<CliResult> {
  const result = await memax(engram, args, { key: ann.key, home, ...options });
  expect(result.code, `memax ${args.join(" ")}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`).toBe(0);
  return result;
}

let askTopic = "";
const flagsTopicForAsk = () => askTopic;

function savedId(stdout: string): string {
  const id = stdout.match(/id: ([0-9a-f-]{36})/)?.[1];
  expect(id, stdout).toBeDefined();
  return id!;
}

describe("topics: archive, archived, restore, clear", () => {
  let topicId = "";
  let memoryId = "";

  it("topic clear takes a memory out of its topic", async () => {
    topicId = savedId((await run(["topic", "create", "Runbooks", "--hub", "personal"])).stdout);
    memoryId = savedId((await run(["push", "Restart the queue worker with systemctl restart worker.", "--hub", "personal"])).stdout);
    await run(["topic", "set", memoryId, "--topic", topicId.slice(0, 8)]);
    expect((await ann.api("GET", `/v1/memories/${memoryId}`)).body.data.topic_id).toBe(topicId);
    const cleared = await run(["topic", "clear", memoryId, "--topic", topicId.slice(0, 8)]);
    expect(cleared.stdout).toContain("Memory topic cleared");
    expect((await ann.api("GET", `/v1/memories/${memoryId}`)).body.data.topic_id ?? null).toBeNull();
  });

  it("topic archive, archived (text and json) and restore", async () => {
    const archived = await run(["topic", "archive", topicId.slice(0, 8), "--hub", "personal"]);
    expect(archived.stdout).toContain("Topic archived");
    const text = (await run(["topic", "archived", "--hub", "personal"])).stdout;
    expect(text).toContain("Runbooks");
    expect(text).toMatch(/archived \d{4}-\d\d-\d\d/);
    const json = JSON.parse((await run(["topic", "archived", "--hub", "personal", "--format", "json"])).stdout);
    expect(json.topics.map((t: any) => t.id)).toEqual([topicId]);
    const restored = await run(["topic", "restore", topicId.slice(0, 8), "--hub", "personal"]);
    expect(restored.stdout).toContain("Topic restored");
    expect((await run(["topic", "archived", "--hub", "personal"])).stdout).toContain("No archived topics.");
  });
});

describe("hub invites: revoke and regenerate", () => {
  it("regenerates an invite under a new id, then revokes it", async () => {
    await run(["hub", "create", "Night Shift"]);
    const created = JSON.parse((await run(["hub", "invite", "create", "--hub", "night-shift", "--role", "viewer", "--format", "json"])).stdout);
    const inviteId: string = created.invite?.id ?? created.id;
    expect(inviteId).toMatch(/^[0-9a-f-]{36}$/);
    const regenerated = await run(["hub", "invite", "regenerate", inviteId.slice(0, 8), "--hub", "night-shift"]);
    expect(regenerated.stdout).toContain("Regenerated invite");
    const newId = regenerated.stdout.match(/new id: ([0-9a-f-]{36})/)?.[1];
    expect(newId, regenerated.stdout).toBeDefined();
    expect(regenerated.stdout).toMatch(/link: \S+\/invite\/\S+/);
    const list = JSON.parse((await run(["hub", "invite", "list", "--hub", "night-shift", "--format", "json"])).stdout);
    expect(list.map((i: any) => i.id)).toEqual([newId]);
    const revoked = JSON.parse((await run(["hub", "invite", "revoke", newId!.slice(0, 8), "--hub", "night-shift", "--format", "json"])).stdout);
    expect(revoked).toBeTruthy();
    expect(JSON.parse((await run(["hub", "invite", "list", "--hub", "night-shift", "--format", "json"])).stdout)).toEqual([]);
  });
});

describe("push --assisted-by", () => {
  it("credits the agent that helped a person", async () => {
    const result = await run(["push", "The on-call rota flips on Mondays.", "--assisted-by", "claude-code"]);
    const stored = (await ann.api("GET", `/v1/memories/${savedId(result.stdout)}`)).body.data;
    expect(stored).toMatchObject({ assisted_by_agent: "claude-code", initiation_type: "human_requested_agent" });
  });
});

describe("capture-session", () => {
  it("pushes a summary as a transcript from the hook", async () => {
    const result = await run(["capture-session", "--agent", "claude-code", "--summary", "Moved the billing cron to 03:00 UTC."]);
    expect(result.stdout).toContain("Session captured.");
    const stored = (await ann.api("GET", `/v1/memories/${savedId(result.stdout)}`)).body.data;
    expect(stored).toMatchObject({ source_agent: "claude-code", content: expect.stringContaining("Moved the billing cron to 03:00 UTC.") });
  });

  it("takes the transcript on stdin", async () => {
    const result = await run(["capture-session", "--agent", "codex"], { stdin: "user: where are backups?\nassistant: in the orion bucket\n" });
    const stored = (await ann.api("GET", `/v1/memories/${savedId(result.stdout)}`)).body.data;
    expect(stored.content).toContain("orion bucket");
  });
});

describe("agents configs list and delete", () => {
  it("lists the synced configs and deletes one", async () => {
    const put = await ann.api("PUT", "/v1/configs", { agent: "claude-code", file_path: "CLAUDE.md", scope: "global", content: "# Rules\n\nUse pnpm.\n" });
    expect(put.status, JSON.stringify(put.body)).toBeLessThan(300);
    const list = await run(["agents", "configs", "list"]);
    expect(list.stdout).toContain("CLAUDE.md");
    const deleted = await memax(engram, ["agents", "configs", "delete"], {
      key: ann.key,
      home,
      answers: [
        { when: /Select configs to delete/, answer: "1" },
        { when: /everywhere, or \[s\] skip\?/, answer: "e" },
        { when: /Delete 1 config everywhere\? \(y\/N\)/, answer: "y" },
      ],
    });
    expect(deleted.code, deleted.stdout + deleted.stderr).toBe(0);
    expect(deleted.stdout).toMatch(/✓ claude-code\/CLAUDE\.md/);
    await eventually(async () => (await ann.api("GET", "/v1/configs")).body.data.configs.length === 0, 10_000, "the config to be deleted");
  });
});

describe("list, recall and push flags", () => {
  let flagsTopic = "";
  let inFlagsTopic = "";

  it("push --ttl and --tags, list --sort, --cursor, --hub and --topic-id", async () => {
    const ids: string[] = [];
    for (const n of [1, 2, 3]) {
      ids.push(savedId((await run(["push", `Flag note ${n}: the staging database is called ember-${n}.`, "--tags", "flags", "--ttl", "7d"])).stdout));
    }
    const stored = (await ann.api("GET", `/v1/memories/${ids[0]}`)).body.data;
    expect(stored.tags).toContain("flags");
    const first = JSON.parse((await run(["list", "--limit", "2", "--format", "json"])).stdout);
    expect(first.memories).toHaveLength(2);
    expect(first.next_cursor).toBeTruthy();
    const second = JSON.parse((await run(["list", "--limit", "2", "--cursor", first.next_cursor, "--format", "json"])).stdout);
    const seen = [...first.memories, ...second.memories].map((m: any) => m.id);
    expect(new Set(seen).size).toBe(seen.length);
    const relevant = await run(["list", "--sort", "relevant", "--format", "json"]);
    expect(JSON.parse(relevant.stdout).memories.length).toBeGreaterThan(0);
    const inHub = JSON.parse((await run(["list", "--hub", "personal", "--format", "json"])).stdout);
    expect(inHub.memories.every((m: any) => m.hub_id === ann.personalHubId)).toBe(true);
    const topicId = savedId((await run(["topic", "create", "Flags", "--hub", "personal"])).stdout);
    await run(["topic", "set", ids[1]!, "--topic", topicId.slice(0, 8)]);
    const inTopic = JSON.parse((await run(["list", "--topic-id", topicId, "--hub", "personal", "--format", "json"])).stdout);
    expect(inTopic.memories.map((m: any) => m.id)).toEqual([ids[1]]);
    flagsTopic = topicId;
    askTopic = topicId;
    inFlagsTopic = ids[1]!;
  });

  it("recall --hook, --max-tokens, --tags, --topic-id and --include-archived", async () => {
    await eventually(async () => {
      const list = await ann.api("GET", "/v1/memories?limit=100");
      return list.body.data.memories.every((m: any) => m.processing_status === "done");
    }, 90_000, "processing");
    const hook = await run(["recall", "staging database ember", "--hook", "--max-tokens", "200"]);
    expect(hook.stdout).toContain("ember-");
    expect(hook.stdout.length).toBeLessThanOrEqual(200 * 4 + 400);
    const tagged = JSON.parse((await run(["recall", "staging database ember", "--tags", "flags", "--format", "json"])).stdout);
    expect(tagged.memories.length).toBeGreaterThan(0);
    const inTopic = JSON.parse((await run(["recall", "staging database ember", "--topic-id", flagsTopic, "--hub", "personal", "--format", "json"])).stdout);
    expect([...new Set(inTopic.memories.map((m: any) => m.memory_id ?? m.id))]).toEqual([inFlagsTopic]);
    const archived = JSON.parse((await run(["recall", "staging database ember", "--include-archived", "--format", "json"])).stdout);
    expect(archived.memories.length).toBeGreaterThan(0);
  });

  it("dreams list --limit --hub and trigger --hub", async () => {
    expect((await run(["dreams", "trigger", "--hub", "personal"])).stdout).toMatch(/Dream cycle queued\./);
    const list = JSON.parse((await run(["dreams", "list", "--limit", "1", "--hub", "personal", "--format", "json"])).stdout);
    expect(list.runs).toHaveLength(1);
  });
});

describe("setup's MCP keys, ask's flags, show --format json, agents doctor", () => {
  async function key(name: string) {
    const keys = (await ann.api("GET", "/v1/auth/api-keys")).body.data as any[];
    return keys.find((k) => k.name === name);
  }

  it("setup --print --api-key --hub --read-only makes a read-only key for that hub", async () => {
    const hub = (await ann.api("GET", "/v1/hubs")).body.data.map((h: any) => h.hub).find((h: any) => h.slug === "night-shift");
    expect(hub).toBeDefined();
    const setup = await run(["setup", "--print", "--api-key", "--hub", "night-shift", "--read-only"]);
    expect(setup.stdout).toMatch(/Bearer egk_[A-Za-z0-9_-]+/);
    expect(await key(`mcp-setup-hub-${hub.id.slice(0, 8)}`)).toMatchObject({ scopes: ["read"], hub_ids: [hub.id] });
  });

  it("setup --print --api-key --agent-sync makes a key that may sync configs", async () => {
    for (const old of ((await ann.api("GET", "/v1/auth/api-keys")).body.data as any[]).filter((k) => k.name === "mcp-setup")) {
      await ann.api("DELETE", `/v1/auth/api-keys/${old.id}`);
    }
    const setup = await run(["setup", "--print", "--api-key", "--agent-sync"]);
    const bearer = setup.stdout.match(/Bearer (egk_[A-Za-z0-9_-]+)/)?.[1];
    expect(bearer, setup.stdout).toBeDefined();
    const put = await fetch(`${engram.url}/v1/configs`, {
      method: "PUT",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      body: JSON.stringify({ agent: "cursor", file_path: ".cursorrules", scope: "global", content: "tabs\n" }),
    });
    expect(put.status, await put.text()).toBe(201);
  });

  it("ask --hub --topic-id --limit --locale --model --no-rerank", async () => {
    const result = await run(["ask", "what is the staging database called?", "--hub", "personal", "--topic-id", flagsTopicForAsk(), "--limit", "3", "--locale", "en", "--model", "haiku", "--no-rerank", "--format", "json"]);
    const answer = JSON.parse(result.stdout);
    expect(answer.answer).toEqual(expect.any(String));
    expect(answer.sources.length).toBeGreaterThan(0);
    expect(answer.sources.length).toBeLessThanOrEqual(3);
  });

  it("show --format json prints the Memory", async () => {
    const id = savedId((await run(["push", "Pager duty escalates after 15 minutes."])).stdout);
    const shown = JSON.parse((await run(["show", id, "--format", "json"])).stdout);
    expect(shown).toMatchObject({ id, content: "Pager duty escalates after 15 minutes.", hub_id: ann.personalHubId });
  });

  it("agents doctor and agents configs doctor read the cloud configs", async () => {
    expect((await run(["agents", "doctor"])).stdout).toContain("Memax Agent Config Doctor");
    expect((await run(["agents", "configs", "doctor"])).stdout).toContain("Memax Agent Config Doctor");
  });
});
