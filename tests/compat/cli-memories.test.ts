import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, memax, scratchHome, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

// Memax's own CLI, unchanged, against the built server: every command's output, and what it
// did to the server (checked through the API behind the CLI's back).

let engram: Engram;
let ann: EngramUser;

beforeAll(async () => {
  engram = await startEngram();
  ann = await engram.user("Ann Example");
});
afterAll(async () => {
  await engram?.stop();
});

const cli = (args: string[], options: { stdin?: string; cwd?: string; key?: string; home?: string } = {}) =>
  memax(engram, args, { key: ann.key, ...options });

/** The server's view of one memory (GET counts an access; these tests do not look at access counts). */
async function stored(id: string) {
  const res = await ann.api("GET", `/v1/memories/${id}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}

function savedId(stdout: string): string {
  const id = stdout.match(/id: ([0-9a-f-]{36})/)?.[1];
  expect(id, stdout).toBeDefined();
  return id!;
}

/** Until background processing has chunked and embedded everything (list reads do not count accesses). */
async function processed() {
  await eventually(async () => {
    const list = await ann.api("GET", "/v1/memories?limit=100");
    return list.body.data.memories.every((m: any) => m.processing_status === "done");
  }, 90_000, "processing");
}

describe("memax push", () => {
  it("pushes text", async () => {
    const result = await cli(["push", "Our staging database is rebuilt every Sunday at 02:00 UTC.", "--tags", "ops,staging"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Saved Our staging database is rebuilt every Sunday at 02:00 UTC\./);
    expect(result.stdout).toMatch(/source: cli/);
    const memory = await stored(savedId(result.stdout));
    expect(memory).toMatchObject({
      content: "Our staging database is rebuilt every Sunday at 02:00 UTC.",
      source: "cli",
      source_agent: null,
      source_path: null,
      tags: ["ops", "staging"],
      content_type: "text",
      hub_id: ann.personalHubId,
      owner_id: ann.id,
    });
  });

  it("pushes a file (--file)", async () => {
    const home = scratchHome();
    writeFileSync(path.join(home, "runbook.md"), "# Failover runbook\n\nPromote the replica with `pg_ctl promote`, then repoint PgBouncer.\n");
    const result = await cli(["push", "--file", "runbook.md", "--hint", "on-call runbook"], { home, cwd: home });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^Saved runbook\.md/);
    const memory = await stored(savedId(result.stdout));
    expect(memory).toMatchObject({ title: "runbook.md", source_path: "runbook.md", content_type: "markdown", source: "cli" });
    expect(memory.content).toContain("pg_ctl promote");
    // Pushing the same file again updates that memory instead of adding one.
    const again = await cli(["push", "--file", "runbook.md"], { home, cwd: home });
    expect(savedId(again.stdout)).toBe(memory.id);
  });

  it("pushes stdin (--stdin)", async () => {
    const text = "Decision: we keep feature flags in LaunchDarkly because audit logs matter to compliance.\n";
    const result = await cli(["push", "--stdin", "--title", "Feature flag decision"], { stdin: text });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^Saved Feature flag decision/);
    const memory = await stored(savedId(result.stdout));
    expect(memory).toMatchObject({ title: "Feature flag decision", content: text, source: "cli" });
  });
});

describe("memax import", () => {
  it("imports a small directory, and re-importing it adds nothing", async () => {
    const home = scratchHome();
    const dir = path.join(home, "notes");
    mkdirSync(path.join(dir, "adr"), { recursive: true });
    writeFileSync(path.join(dir, "README.md"), "# Payments service\n\nHandles card captures through Stripe.\n");
    writeFileSync(path.join(dir, "adr", "0001-queues.md"), "# ADR 1: queues\n\nWe use SQS for retries because it is managed.\n");
    writeFileSync(path.join(dir, "deploy.sh"), "#!/bin/sh\nkubectl rollout restart deployment/payments\n");
    writeFileSync(path.join(dir, "image.png"), "not text, not imported");

    const result = await cli(["import", "notes"], { home, cwd: home });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain("Found 3 files to import");
    expect(result.stdout).toMatch(/Imported 3 files/);
    expect(result.stdout).not.toMatch(/errors/);
    for (const file of ["README.md", "adr/0001-queues.md", "deploy.sh"]) expect(result.stdout).toContain(`+ ${file}`);

    const list = (await ann.api("GET", "/v1/memories?limit=100")).body.data.memories.filter((m: any) => m.source === "import");
    expect(list.map((m: any) => m.source_path).sort()).toEqual(["README.md", "adr/0001-queues.md", "deploy.sh"]);
    const adr = list.find((m: any) => m.source_path === "adr/0001-queues.md");
    expect(adr).toMatchObject({ title: "adr/0001-queues.md", content_type: "markdown", hub_id: ann.personalHubId });
    expect(list.find((m: any) => m.source_path === "deploy.sh").content_type).toBe("code");

    const again = await cli(["import", "notes"], { home, cwd: home });
    expect(again.code).toBe(0);
    const after = (await ann.api("GET", "/v1/memories?limit=100")).body.data.memories.filter((m: any) => m.source === "import");
    expect(after).toHaveLength(3);
  });
});

describe("memax recall, list, show, delete", () => {
  it("recalls as text and as JSON", async () => {
    await processed();
    const text = await cli(["recall", "how do we promote the replica during failover"]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout.split("\n")[0]).toMatch(/^runbook\.md \[.+\] \d+% · .+ \([0-9a-f-]{36}\)$/);

    const json = await cli(["recall", "why do we use SQS for retries", "--format", "json"]);
    expect(json.code, json.stderr).toBe(0);
    const parsed = JSON.parse(json.stdout);
    expect(parsed.memories[0]).toMatchObject({ title: "adr/0001-queues.md", kind: expect.any(String), age: expect.any(String) });
    expect(parsed.memories[0].relevance_score).toBeGreaterThan(0);
    expect(parsed.query_metadata).toMatchObject({ intent: "why", total_candidates: expect.any(Number) });
    // The server's own answer to the same question agrees.
    const direct = await ann.api("POST", "/v1/recall", { query: "why do we use SQS for retries" });
    expect(direct.body.data.memories[0].id).toBe(parsed.memories[0].id);
  });

  it("lists every page (--all) and as text", async () => {
    const total = (await ann.api("GET", "/v1/memories?limit=1")).body.data.total;
    expect(total).toBe(6);
    const all = await cli(["list", "--all", "--limit", "2", "--format", "json"]);
    expect(all.code, all.stderr).toBe(0);
    const parsed = JSON.parse(all.stdout);
    expect(parsed).toMatchObject({ total, has_more: false, next_cursor: "" });
    expect(new Set(parsed.memories.map((m: any) => m.id)).size).toBe(total);

    const firstPage = JSON.parse((await cli(["list", "--limit", "2", "--format", "json"])).stdout);
    expect(firstPage.memories).toHaveLength(2);
    expect(firstPage.has_more).toBe(true);

    const text = await cli(["list"]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`6 memories (${total} total)`);
    expect(text.stdout).toMatch(/Feature flag decision \[\w+ · \w+\] · cli/);
  });

  it("shows one memory", async () => {
    const id = (await ann.api("GET", "/v1/memories?limit=100")).body.data.memories.find((m: any) => m.title === "runbook.md").id;
    const result = await cli(["show", id]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.split("\n")[0]).toBe("runbook.md");
    expect(result.stdout).toContain(`id: ${id}`);
    expect(result.stdout).toContain("pg_ctl promote");
    const json = JSON.parse((await cli(["show", id, "--format", "json"])).stdout);
    expect(json).toMatchObject({ id, title: "runbook.md", source_path: "runbook.md" });
  });

  it("deletes one memory", async () => {
    const id = (await ann.api("GET", "/v1/memories?limit=100")).body.data.memories.find((m: any) => m.title === "Feature flag decision").id;
    const result = await cli(["delete", id, "--yes"]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`Forgotten. ${id}`);
    expect((await ann.api("GET", `/v1/memories/${id}`)).status).toBe(404);
    const again = await cli(["delete", id, "--yes"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/Delete failed: Memory not found/);
  });
});

describe("memax auth and whoami", () => {
  it("creates, lists and revokes keys", async () => {
    const created = await cli(["auth", "create-key", "ci-pipeline", "--expires", "30"]);
    expect(created.code, created.stderr).toBe(0);
    const key = created.stdout.match(/Key:\s+(egk_\S+)/)?.[1];
    expect(key, created.stdout).toBeDefined();
    expect(created.stdout).toMatch(/Scope:\s+all accessible hubs/);
    expect(created.stdout).not.toMatch(/Expires:\s+never/);
    const readOnly = await cli(["auth", "create-key", "reader", "--read-only", "--agent", "claude-code"]);
    expect(readOnly.code, readOnly.stderr).toBe(0);
    const readKey = readOnly.stdout.match(/Key:\s+(egk_\S+)/)![1]!;
    expect(readOnly.stdout).toMatch(/Agent:\s+claude-code/);

    const keys = (await ann.api("GET", "/v1/auth/api-keys")).body.data;
    const ci = keys.find((k: any) => k.name === "ci-pipeline");
    expect(ci).toMatchObject({ scopes: ["read", "write"], hub_scope_mode: "all_accessible", prefix: key!.slice(0, 10) });
    expect(keys.find((k: any) => k.name === "reader")).toMatchObject({ scopes: ["read"], agent_name: "claude-code" });

    // The new keys work as issued: the read-only one reads but cannot push.
    expect((await memax(engram, ["list", "--format", "json"], { key: readKey })).code).toBe(0);
    const refused = await memax(engram, ["push", "should not be stored"], { key: readKey });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/Push failed: .*read-only/);
    const viaCi = await memax(engram, ["push", "pushed with the CI key"], { key: key! });
    expect(viaCi.code, viaCi.stderr).toBe(0);

    const listed = await cli(["auth", "list-keys"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`${key!.slice(0, 10)}\\.\\.\\.  ci-pipeline  all accessible hubs \\[unassigned\\]`));
    expect(listed.stdout).toMatch(/reader  all accessible hubs \[claude-code\]/);
    expect(listed.stdout).toContain(`ID: ${ci.id}`);
    expect(listed.stdout).toMatch(/Last used: (?!never)/);

    const revoked = await cli(["auth", "revoke-key", ci.id]);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain("API key revoked.");
    expect((await memax(engram, ["list"], { key: key! })).code).toBe(1);
    const twice = await cli(["auth", "revoke-key", ci.id]);
    expect(twice.code).toBe(0);
    expect(twice.stdout).toContain("API key not found (already revoked).");
    expect((await ann.api("GET", "/v1/auth/api-keys")).body.data.map((k: any) => k.id)).not.toContain(ci.id);
  });

  it("whoami reads the stored credential", async () => {
    const home = scratchHome();
    mkdirSync(path.join(home, ".memax"), { recursive: true });
    writeFileSync(path.join(home, ".memax", "credentials.json"), JSON.stringify({ access_token: ann.key, expires_at: Date.now() + 3_600_000 }));
    const result = await memax(engram, ["whoami"], { home });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`Ann Example (${ann.email})`);
    expect(result.stdout).toContain("Plan: self_hosted");
    // This month's pushes, as the server counts them.
    const me = (await ann.api("GET", "/v1/auth/me")).body.data;
    expect(me.usage.push_count).toBeGreaterThan(0);
    expect(result.stdout).toContain(`Usage: ${me.usage.push_count} pushes`);

    const renamed = await ann.api("PATCH", "/v1/auth/me", { display_name: "Ann E." });
    expect(renamed.status).toBe(200);
    expect((await memax(engram, ["whoami"], { home })).stdout).toContain(`Ann E. (${ann.email})`);
  });
});
