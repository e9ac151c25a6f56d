import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { createHash, randomBytes } from "node:crypto";
import { batchMoveMemories } from "@/lib/memories/batch-move-memories.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { charactersRead } from "./support/characters-read.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
let ann: Client;
let bob: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
});
afterAll(() => h.close());

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

describe("POST /v1/memories", () => {
  test("creates in the personal hub with derived title, hash, classification and 201", async () => {
    const content = "# Release process\n\nRun the migrations first, then deploy the web tier.";
    const res = await ann.post("/v1/memories", { content, tags: ["ops", "ops", "release"] });
    expect(res.status).toBe(201);
    const m = res.body.data;
    expect(m).toMatchObject({
      hub_id: ann.personalHubId,
      owner_id: ann.id,
      title: "Release process",
      content_type: "markdown",
      content_hash: sha256(content),
      tags: ["ops", "release"],
      boundary: "private",
      state: "active",
      source: "api",
      version: 1,
      summary: expect.any(String),
    });
    expect(["episodic", "semantic", "procedural", "rationale"]).toContain(m.kind);
    expect(["volatile", "evolving", "stable"]).toContain(m.stability);
    expect(m.content).toBeUndefined();
    expect(m.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Date(m.created_at).toISOString()).toBe(m.created_at);
  });

  test("title from the first non-empty line when there is no heading, trimmed to 80 chars", async () => {
    const line = "word ".repeat(40).trim();
    const res = await ann.post("/v1/memories", { content: `\n\n  ${line}\nsecond line` });
    expect(res.status).toBe(201);
    expect(res.body.data.title.length).toBeLessThanOrEqual(80);
    expect(line.startsWith(res.body.data.title.replace(/…$/, ""))).toBe(true);
  });

  test("a heading with a long run of spaces before its last word is titled in linear time (ReDoS)", async () => {
    // The closing-hashes regex rescanned the run from each of its spaces: minutes for this one push.
    const content = `# Release notes${" ".repeat(500_000)}#x\n\nBody.`;
    const started = performance.now();
    const res = await ann.post("/v1/memories", { content });
    expect(res.status, res.text).toBe(201);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(res.body.data.title).toBe("Release notes #x");
    const titled = async (heading: string) => (await ann.post("/v1/memories", { content: `${heading}\n\nBody.` })).body.data.title as string;
    expect(await titled("## Setup ##")).toBe("Setup");
    expect(await titled("# Setup \t##  ")).toBe("Setup");
    expect(await titled("# Setup#")).toBe("Setup#");
    expect(await titled("# C# # notes")).toBe("C# # notes");
    expect(await titled("# Rollback # #")).toBe("Rollback #");
  });

  test("a # line inside a fenced code block is not the title, nor is the fence", async () => {
    const titled = async (content: string) => {
      const res = await ann.post("/v1/memories", { content });
      expect(res.status, res.text).toBe(201);
      return res.body.data.title as string;
    };
    expect(await titled("Deploy notes\n\n```bash\n# install deps\nnpm ci\n```\n")).toBe("Deploy notes");
    expect(await titled("```sh\n# build\nmake\n```\n\n## Building the image\n\nRun make.")).toBe("Building the image");
    // A longer fence is closed only by one at least as long; ~~~ does not close ```.
    expect(await titled("````md\n```\n# not a heading\n````\n~~~\n# still code\n~~~\nAfter the code")).toBe("After the code");
    // All code: its first line.
    expect(await titled("```python\n\nprint('hello')\n```")).toBe("print('hello')");
  });

  test("honours explicit fields and infers content_type from source_path", async () => {
    const res = await ann.post("/v1/memories", {
      content: "export function add(a: number, b: number) {\n  return a + b;\n}\n",
      title: "Adder",
      kind: "procedural",
      stability: "stable",
      source: "cli",
      source_agent: "claude-code",
      initiation_type: "agent_proactive",
      source_path: "src/math/add.ts",
      project_context: { repo: "acme/app", branch: "main" },
      hub_reason: "shared helper",
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({
      title: "Adder",
      kind: "procedural",
      stability: "stable",
      source: "cli",
      source_agent: "claude-code",
      content_type: "code",
      source_path: "src/math/add.ts",
      project_context: { repo: "acme/app", branch: "main" },
    });
  });

  test("same content in the same hub returns the existing memory with 200 and writes nothing", async () => {
    const first = await ann.post("/v1/memories", { content: "dedup me by hash" });
    const again = await ann.post("/v1/memories", { content: "dedup me by hash", title: "other title" });
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.body.data.id).toBe(first.body.data.id);
    expect(await h.db.memory.count({ where: { contentHash: sha256("dedup me by hash") } })).toBe(1);
    // another user's identical content is their own memory
    const bobs = await bob.post("/v1/memories", { content: "dedup me by hash" });
    expect(bobs.status).toBe(201);
    expect(bobs.body.data.id).not.toBe(first.body.data.id);
  });

  test("same source_path updates in place: version bump on change, unchanged otherwise", async () => {
    const v1 = await ann.post("/v1/memories", { content: "# Notes\n\nv1", source_path: "docs/notes.md" });
    expect(v1.status).toBe(201);
    const same = await ann.post("/v1/memories", { content: "# Notes\n\nv1", source_path: "docs/notes.md" });
    expect(same.status).toBe(200);
    expect(same.body.data).toMatchObject({ id: v1.body.data.id, version: 1, updated_at: v1.body.data.updated_at });
    const v2 = await ann.post("/v1/memories", { content: "# Notes v2\n\nchanged", source_path: "docs/notes.md" });
    expect(v2.status).toBe(200);
    expect(v2.body.data).toMatchObject({ id: v1.body.data.id, version: 2, title: "Notes v2", content_hash: sha256("# Notes v2\n\nchanged") });
    const got = await ann.get(`/v1/memories/${v1.body.data.id}`);
    expect(got.body.data.content).toBe("# Notes v2\n\nchanged");
    expect(await h.db.memory.count({ where: { sourcePath: "docs/notes.md" } })).toBe(1);
  });

  test("new content pushed to an archived memory's source_path makes it active again (the same content does not)", async () => {
    const v1 = (await ann.post("/v1/memories", { content: "# Pager rota\n\nMira this week", source_path: "ops/rota.md" })).body.data;
    expect((await ann.patch(`/v1/memories/${v1.id}`, { state: "archived" })).body.data.state).toBe("archived");
    const same = await ann.post("/v1/memories", { content: "# Pager rota\n\nMira this week", source_path: "ops/rota.md" });
    expect(same.body.data).toMatchObject({ id: v1.id, state: "archived", version: 1 });
    // As a dream leaves a merged memory: archived, pointing at its successor.
    await h.db.memory.update({ where: { id: v1.id }, data: { supersededBy: v1.id } });
    const v2 = await ann.post("/v1/memories", { content: "# Pager rota\n\nIvo this week", source_path: "ops/rota.md" });
    expect(v2.status, v2.text).toBe(200);
    expect(v2.body.data).toMatchObject({ id: v1.id, state: "active", version: 2 });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: v1.id } })).supersededBy).toBeNull();
  });

  test("a contributor's push to another member's source_path does not rewrite it (403); an admin's does; the same content is a no-op", async () => {
    const carl = await h.user("Carl");
    const dora = await h.user("Dora");
    const hub = await h.teamHub(ann, [[carl, "contributor"], [dora, "admin"]]);
    const on = { headers: { "x-hub-id": hub } };
    const original = (await ann.post("/v1/memories", { content: "# Runbook\n\nRestart with kubectl.", source_path: "ops/runbook.md", tags: ["ops"] }, on)).body.data;
    const hijack = await carl.post("/v1/memories", { content: "x", source_path: "ops/runbook.md", tags: ["mine"] }, on);
    expect(hijack.status).toBe(403);
    expect(hijack.body.error).toMatchObject({ code: "forbidden", details: { memory_id: original.id } });
    const same = await carl.post("/v1/memories", { content: "# Runbook\n\nRestart with kubectl.", source_path: "ops/runbook.md" }, on);
    expect(same.status).toBe(200);
    expect(same.body.data).toMatchObject({ id: original.id, version: 1 });
    const stored = await h.db.memory.findUniqueOrThrow({ where: { id: original.id } });
    expect([stored.content, stored.tags, stored.version]).toEqual(["# Runbook\n\nRestart with kubectl.", ["ops"], 1]);
    // An admin may edit anyone's memory, so the push updates it in place.
    const edited = await dora.post("/v1/memories", { content: "# Runbook\n\nRestart with helm.", source_path: "ops/runbook.md" }, on);
    expect(edited.status).toBe(200);
    expect(edited.body.data).toMatchObject({ id: original.id, version: 2 });
    // The contributor's own path still updates in place.
    const mine = (await carl.post("/v1/memories", { content: "v1", source_path: "carl/notes.md" }, on)).body.data;
    expect((await carl.post("/v1/memories", { content: "v2", source_path: "carl/notes.md" }, on)).body.data).toMatchObject({ id: mine.id, version: 2 });
  });

  test("concurrent pushes of one source_path end as one memory", async () => {
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => ann.post("/v1/memories", { content: `racing ${i}`, source_path: "race/path.md" })),
    );
    for (const r of results) expect([200, 201]).toContain(r.status);
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(await h.db.memory.count({ where: { sourcePath: "race/path.md", hubId: ann.personalHubId } })).toBe(1);
  });

  test("source import keeps created_at; other sources may not set it", async () => {
    const at = "2024-03-05T10:11:12.000Z";
    const imported = await ann.post("/v1/memories", { content: "imported history", source: "import", created_at: at });
    expect(imported.status).toBe(201);
    expect(imported.body.data.created_at).toBe(at);
    const rejected = await ann.post("/v1/memories", { content: "not an import", created_at: at });
    expect(rejected.status).toBe(400);
    expect(rejected.body.error.code).toBe("invalid_request");
    const future = await ann.post("/v1/memories", { content: "from the future", source: "import", created_at: "2999-01-01T00:00:00Z" });
    expect(future.status).toBe(400);
    // Before the Unix epoch: a clear 400 (it was a 500 from the time-ordered id).
    const ancient = await ann.post("/v1/memories", { content: "moon landing notes", source: "import", created_at: "1969-07-20T20:17:00Z" });
    expect(ancient.status).toBe(400);
    expect(ancient.body.error.details.issues[0].path).toBe("created_at");
  });

  test("limits: content over 3 MiB is 413, tags and title bounded", async () => {
    const big = await ann.post("/v1/memories", { content: "x".repeat(3 * 1024 * 1024 + 1) });
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe("body_too_large");
    const atLimit = await ann.post("/v1/memories", { content: "y".repeat(3 * 1024 * 1024) });
    expect(atLimit.status).toBe(201);
    const tooMany = await ann.post("/v1/memories", { content: "tags", tags: Array.from({ length: 51 }, (_, i) => `t${i}`) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error.details.issues[0].path).toBe("tags");
    const fifty = await ann.post("/v1/memories", { content: "fifty tags", tags: Array.from({ length: 50 }, (_, i) => `t${i}`) });
    expect(fifty.status).toBe(201);
    const longTag = await ann.post("/v1/memories", { content: "tags", tags: ["x".repeat(65)] });
    expect(longTag.status).toBe(400);
    const longTitle = await ann.post("/v1/memories", { content: "title", title: "t".repeat(201) });
    expect(longTitle.status).toBe(400);
    expect(longTitle.body.error.details.issues[0].path).toBe("title");
    const huge = await ann.post("/v1/memories", undefined, { raw: JSON.stringify({ content: "z".repeat(9 * 1024 * 1024) }) });
    expect(huge.status).toBe(413);
  });

  test.each([
    [{}, "content"],
    [{ content: "" }, "content"],
    [{ content: 42 }, "content"],
    [{ content: "x", kind: "fact" }, "kind"],
    [{ content: "x", stability: "forever" }, "stability"],
    [{ content: "x", content_type: "pdf" }, "content_type"],
    // "file" names an upload (file_ref); without one nothing is ever read and no attachment exists.
    [{ content: "x", content_type: "file" }, "content_type"],
    [{ content: "x", content_type: "file", source_path: "docs/spec.pdf" }, "content_type"],
    [{ content: "x", source: "s".repeat(65) }, "source"],
    [{ content: "x", source: 7 }, "source"],
    [{ content: "x", initiation_type: "robot" }, "initiation_type"],
    [{ content: "x", tags: "ops" }, "tags"],
    [{ content: "x", tags: [""] }, "tags.0"],
    [{ content: "x", project_context: { repo: 1 } }, "project_context.repo"],
    [{ content: "x", project_context: "acme" }, "project_context"],
    [{ content: "x", created_at: "yesterday", source: "import" }, "created_at"],
    [{ content: "x", title: "   " }, "title"],
    [{ content: "x", file_ref: { object_key: "k", filename: "a.pdf", content_type: "application/pdf", sha256: "nothex" } }, "file_ref.sha256"],
    [{ content: "x", project_context: { working_dir: 5 } }, "project_context.working_dir"],
  ])("invalid field %j → 400 invalid_request at %s", async (body, path) => {
    const res = await ann.post("/v1/memories", body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.details.issues.map((i: { path: string }) => i.path)).toContain(path);
  });

  test("lenient input: empty optional strings are absent, unknown fields are ignored with a warning", async () => {
    // What Memax's SDK sends for `push("…")` with no options, plus fields this server does not know.
    const res = await ann.post("/v1/memories", {
      content: "# Lenient push\n\nThe SDK sends empty strings for unset options.",
      title: "",
      hint: "",
      tags: [],
      source: "sdk",
      source_agent: "",
      assisted_by_agent: "",
      initiation_type: "",
      source_path: "",
      hub_reason: "",
      content_type: "markdown",
      future_field: { anything: true },
      ttl: "7d",
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ title: "Lenient push", source: "sdk", source_agent: null, assisted_by_agent: null, initiation_type: null, source_path: null });
    expect(res.headers.get("x-engram-warning")).toBe("ignored unknown fields: future_field, ttl");
    const stored = await h.db.memory.findUniqueOrThrow({ where: { id: res.body.data.id } });
    expect(stored).toMatchObject({ hint: null, hubReason: null, titleDerived: true });
    // Nothing ignored, no warning.
    expect((await ann.post("/v1/memories", { content: "plain push, nothing ignored" })).headers.get("x-engram-warning")).toBeNull();
  });

  test("source is free-form (≤ 64 chars); project_context keeps extra string keys", async () => {
    const res = await ann.post("/v1/memories", {
      content: "captured by an MCP tool",
      source: "mcp/capture",
      project_context: { repo: "github.com/acme/api", working_dir: "/home/ann/api", git_remote: "git@github.com:acme/api.git" },
    });
    expect(res.status).toBe(201);
    expect(res.body.data.source).toBe("mcp/capture");
    expect(res.body.data.project_context).toEqual({ repo: "github.com/acme/api", working_dir: "/home/ann/api", git_remote: "git@github.com:acme/api.git" });
    const tooMany = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"]));
    expect((await ann.post("/v1/memories", { content: "x", project_context: tooMany })).status).toBe(400);
  });

  test("file_ref with sha256, no size_bytes and empty content is understood; an unknown object is refused clearly", async () => {
    const before = await h.db.memory.count();
    const res = await ann.post("/v1/memories", {
      content: "",
      file_ref: { object_key: "uploads/abc", filename: "spec.pdf", content_type: "application/pdf", sha256: "a".repeat(64) },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.details.issues[0].path).toBe("file_ref");
    expect(res.body.error.message).toMatch(/not name an upload of yours/);
    // Without file_ref, empty content is still an error about content.
    const empty = await ann.post("/v1/memories", { content: "" });
    expect(empty.body.error.details.issues[0].path).toBe("content");
    expect(await h.db.memory.count()).toBe(before);
  });

  test("X-Timezone: an unknown zone is ignored with a warning; a valid one is accepted silently", async () => {
    const bad = await ann.get("/v1/memories?limit=1", { headers: { "x-timezone": "Mars/Olympus_Mons" } });
    expect(bad.status).toBe(200);
    expect(bad.headers.get("x-engram-warning")).toMatch(/X-Timezone/);
    const good = await ann.get("/v1/memories?limit=1", { headers: { "x-timezone": "Asia/Tokyo" } });
    expect(good.headers.get("x-engram-warning")).toBeNull();
  });

  test("malformed JSON and non-object bodies are invalid_json", async () => {
    for (const raw of ["{not json", "[1,2]", "\"text\"", "", "null"]) {
      const res = await ann.post("/v1/memories", undefined, { raw });
      expect(res.status, raw).toBe(400);
      expect(res.body.error.code, raw).toBe("invalid_json");
    }
  });

  test("X-Hub-ID: a hub the caller is not in is 404; a viewer may not push (403)", async () => {
    const team = await h.teamHub(bob, [[ann, "viewer"]]);
    const foreign = await ann.post("/v1/memories", { content: "x" }, { headers: { "x-hub-id": (await h.teamHub(bob)) } });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe("not_found");
    const bogus = await ann.post("/v1/memories", { content: "x" }, { headers: { "x-hub-id": "not-a-uuid" } });
    expect(bogus.status).toBe(404);
    const asViewer = await ann.post("/v1/memories", { content: "viewer push" }, { headers: { "x-hub-id": team } });
    expect(asViewer.status).toBe(403);
    expect(asViewer.body.error.code).toBe("forbidden");
    const asOwner = await bob.post("/v1/memories", { content: "team note" }, { headers: { "x-hub-id": team } });
    expect(asOwner.status).toBe(201);
    expect(asOwner.body.data.hub_id).toBe(team);
  });
});

describe("GET /v1/memories/{id}", () => {
  test("returns content and attachments and counts the access", async () => {
    const created = (await ann.post("/v1/memories", { content: "read me twice" })).body.data;
    const first = await ann.get(`/v1/memories/${created.id}`);
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({ id: created.id, content: "read me twice", attachments: [], access_count: 1 });
    const second = await ann.get(`/v1/memories/${created.id}`);
    expect(second.body.data.access_count).toBe(2);
    expect(second.body.data.updated_at).toBe(created.updated_at);
  });

  test("POST …/access counts a deliberate view once: after the GET of the same open it adds nothing, a minute later it counts", async () => {
    const created = (await ann.post("/v1/memories", { content: "opened by the CLI" })).body.data;
    // `memax show`: GET (counts) then the signal (the same open).
    const shown = await ann.get(`/v1/memories/${created.id}`);
    expect(shown.body.data.access_count).toBe(1);
    const signalled = await ann.post(`/v1/memories/${created.id}/access`);
    expect(signalled.status).toBe(200);
    expect(signalled.body.data).toEqual({ id: created.id, access_count: 1, accessed_at: shown.body.data.accessed_at, counted: false });
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 61_000);
      const later = await ann.post(`/v1/memories/${created.id}/access`);
      expect(later.body.data).toMatchObject({ access_count: 2, counted: true });
      expect(Date.parse(later.body.data.accessed_at)).toBeGreaterThan(Date.parse(shown.body.data.accessed_at) + 60_000);
      expect((await ann.post(`/v1/memories/${created.id}/access`)).body.data).toMatchObject({ access_count: 2, counted: false });
    } finally {
      vi.useRealTimers();
    }
    // The same open with the id in capitals (a UUID is case-insensitive) is still the same open.
    const upper = (await ann.post("/v1/memories", { content: "opened by a client that upper-cases ids" })).body.data;
    expect((await ann.get(`/v1/memories/${upper.id}`)).body.data.access_count).toBe(1);
    expect((await ann.post(`/v1/memories/${upper.id.toUpperCase()}/access`)).body.data).toMatchObject({ id: upper.id, access_count: 1, counted: false });
    // A signal alone (an agent that already had the content) counts.
    const unread = (await ann.post("/v1/memories", { content: "recalled, then opened" })).body.data;
    expect((await ann.post(`/v1/memories/${unread.id}/access`)).body.data).toMatchObject({ access_count: 1, counted: true });
    // Another user's open is their own: a viewer of a team hub counts once more.
    const cy = await h.user("Cy");
    const team = await h.teamHub(ann, [[cy, "viewer"]]);
    const shared = (await ann.post("/v1/memories", { content: "team note to open" }, { headers: { "x-hub-id": team } })).body.data;
    await ann.get(`/v1/memories/${shared.id}`);
    expect((await cy.post(`/v1/memories/${shared.id}/access`)).body.data).toMatchObject({ access_count: 2, counted: true });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: shared.id } })).accessCount).toBe(2);
    // Unreadable, unknown and malformed ids are not_found, and count nothing.
    for (const id of [shared.id, "01900000-0000-7000-8000-000000000000", "nope"]) {
      const res = await bob.post(`/v1/memories/${id}/access`);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("not_found");
    }
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: shared.id } })).accessCount).toBe(2);
    expect((await ann.get(`/v1/memories/${created.id}/access`)).status).toBe(405);
  });

  test("another user's memory, a random id and a malformed id are all not_found", async () => {
    const mine = (await ann.post("/v1/memories", { content: "private to ann" })).body.data;
    for (const id of [mine.id, "01900000-0000-7000-8000-000000000000", "nope"]) {
      const res = await bob.get(`/v1/memories/${id}`);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("not_found");
      expect(res.text).not.toContain("private to ann");
    }
  });
});

describe("PATCH /v1/memories/{id}", () => {
  test("changes title and tags without a version bump; content bumps version and re-hashes", async () => {
    const m = (await ann.post("/v1/memories", { content: "# Original\n\nbody" })).body.data;
    const titled = await ann.patch(`/v1/memories/${m.id}`, { title: "Renamed", tags: ["a"] });
    expect(titled.status).toBe(200);
    expect(titled.body.data).toMatchObject({ title: "Renamed", tags: ["a"], version: 1 });
    const changed = await ann.patch(`/v1/memories/${m.id}`, { content: "# New heading\n\nnew body" });
    expect(changed.body.data).toMatchObject({ version: 2, content_hash: sha256("# New heading\n\nnew body"), title: "Renamed", processing_status: "pending" });
    const sameContent = await ann.patch(`/v1/memories/${m.id}`, { content: "# New heading\n\nnew body" });
    expect(sameContent.body.data.version).toBe(2);
  });

  test("a tag or classification edit leaves the stored text alone: no new copy of it is written", async () => {
    // Random text, which PostgreSQL cannot compress: about 1 MB out of line (TOAST) whichever database runs.
    const content = `# Samples\n\n${randomBytes(750_000).toString("base64")}`;
    const m = (await ann.post("/v1/memories", { content })).body.data;
    const toastBytes = async () =>
      Number(
        (await h.db.$queryRawUnsafe<{ n: bigint }[]>(`SELECT pg_relation_size(reltoastrelid)::bigint AS n FROM pg_class WHERE relname = 'memories'`))[0]!.n,
      );
    const before = await toastBytes();
    // (A title edit rewrites the search vector, which holds the title with the text.)
    const res = await ann.patch(`/v1/memories/${m.id}`, { tags: ["lab"], kind: "semantic", stability: "stable" });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ tags: ["lab"], kind: "semantic", stability: "stable", content, version: 1 });
    // It used to write the unchanged text back and rebuild the search vector from it: 2 MB of TOAST per edit.
    expect((await toastBytes()) - before).toBeLessThan(100_000);
  });

  test("a hint can be taken back: \"\" or null clears it, absent keeps it", async () => {
    const m = (await ann.post("/v1/memories", { content: "Notes from the call.", hint: "a deploy runbook" })).body.data;
    expect(m.hint).toBe("a deploy runbook");
    const cleared = await ann.patch(`/v1/memories/${m.id}`, { hint: "" });
    expect(cleared.status, cleared.text).toBe(200);
    expect(cleared.body.data.hint).toBeNull();
    await ann.patch(`/v1/memories/${m.id}`, { hint: "a deploy runbook" });
    const nulled = await ann.patch(`/v1/memories/${m.id}`, { hint: null });
    expect(nulled.status, nulled.text).toBe(200);
    expect(nulled.body.data.hint).toBeNull();
    expect((await h.db.memory.findUnique({ where: { id: m.id } }))!.hint).toBeNull();
    // Absent, it stays as it was.
    await ann.patch(`/v1/memories/${m.id}`, { hint: "kept" });
    expect((await ann.patch(`/v1/memories/${m.id}`, { tags: ["x"] })).body.data.hint).toBe("kept");
  });

  test("answers the full memory, as GET does: content, attachments and Memax's fields", async () => {
    const m = (await ann.post("/v1/memories", { content: "# Keys\n\nRotate quarterly.", hint: "security runbook" })).body.data;
    expect(m).toMatchObject({ hint: "security runbook", pinned: false, retrieval_weight: 1, accessed_at: m.created_at });
    const patched = await ann.patch(`/v1/memories/${m.id}`, { tags: ["security"] });
    expect(patched.status, patched.text).toBe(200);
    const { access_count: _a, accessed_at: _b, ...fetched } = (await ann.get(`/v1/memories/${m.id}`)).body.data;
    const { access_count: _c, accessed_at: _d, ...answered } = patched.body.data;
    expect(answered).toEqual(fetched);
    expect(answered).toMatchObject({ content: "# Keys\n\nRotate quarterly.", attachments: [], tags: ["security"], hint: "security runbook" });
    // Reading it is an access.
    const read = (await ann.get(`/v1/memories/${m.id}`)).body.data;
    expect(Date.parse(read.accessed_at)).toBeGreaterThan(Date.parse(m.created_at));
  });

  test("a memory that becomes a link is read as a pushed link: a new version, processing until its page is read", async () => {
    const url = (await ann.post("/v1/memories", { content: "https://example.test/handbook", content_type: "markdown" })).body.data;
    await h.db.memory.update({ where: { id: url.id }, data: { processingStatus: "done" } });
    const linked = await ann.patch(`/v1/memories/${url.id}`, { content_type: "link" });
    expect(linked.status, linked.text).toBe(200);
    expect(linked.body.data).toMatchObject({ content_type: "link", state: "processing", version: 2, processing_status: "pending" });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: url.id } })).extractedAt).toBeNull();
  });

  test("content_type link needs one http(s) URL as on create: a memory becoming a link, or an unread link's new content; a read link's text stays editable", async () => {
    const notes = (await ann.post("/v1/memories", { content: "plain notes about deploys" })).body.data;
    for (const body of [{ content_type: "link" }, { content_type: "link", content: "file:///etc/passwd" }, { content_type: "link", content: "see the wiki" }]) {
      const res = await ann.patch(`/v1/memories/${notes.id}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    const stored = await h.db.memory.findUniqueOrThrow({ where: { id: notes.id } });
    expect({ content: stored.content, content_type: stored.contentType }).toEqual({ content: "plain notes about deploys", content_type: notes.content_type });

    const url = (await ann.post("/v1/memories", { content: "https://example.test/runbook", content_type: "markdown" })).body.data;
    const linked = await ann.patch(`/v1/memories/${url.id}`, { content_type: "link" });
    expect(linked.status, linked.text).toBe(200);
    expect(linked.body.data.content_type).toBe("link");
    // Not read yet (no extracted text): new content is what will be fetched.
    expect((await ann.patch(`/v1/memories/${url.id}`, { content: "not a url" })).status).toBe(400);

    // Once read, a link's content is the page's text: edits and labels of it are not URLs, and need not be.
    await h.db.memory.update({ where: { id: url.id }, data: { content: "# Runbook\n\nThe page's text.", extractedAt: new Date() } });
    expect((await ann.patch(`/v1/memories/${url.id}`, { title: "Runbook page", content_type: "link" })).status).toBe(200);
    expect((await ann.patch(`/v1/memories/${url.id}`, { content: "# Runbook\n\nThe page's text, corrected." })).status).toBe(200);
  });

  test("content_type file is refused on a memory with no upload behind it (400), as on create", async () => {
    const notes = (await ann.post("/v1/memories", { content: "typed-in quarterly numbers" })).body.data;
    const res = await ann.patch(`/v1/memories/${notes.id}`, { content_type: "file" });
    expect(res.status, res.text).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.details.issues.map((i: { path: string }) => i.path)).toContain("content_type");
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: notes.id } })).contentType).toBe(notes.content_type);
  });

  test("a derived title follows content changes", async () => {
    const m = (await ann.post("/v1/memories", { content: "# First\n\nbody" })).body.data;
    const changed = await ann.patch(`/v1/memories/${m.id}`, { content: "# Second\n\nbody" });
    expect(changed.body.data.title).toBe("Second");
  });

  test("archive and restore; invalid state and empty bodies are 400", async () => {
    const m = (await ann.post("/v1/memories", { content: "archive me" })).body.data;
    expect((await ann.patch(`/v1/memories/${m.id}`, { state: "archived" })).body.data.state).toBe("archived");
    expect((await ann.patch(`/v1/memories/${m.id}`, { state: "active" })).body.data.state).toBe("active");
    for (const body of [{ state: "processing" }, { state: "deleted" }, {}, { titel: "typo" }, { kind: "fact" }]) {
      const res = await ann.patch(`/v1/memories/${m.id}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
  });

  test("roles: contributor edits own only, viewer none, admin anyone's; outsiders get 404", async () => {
    const carl = await h.user("Carl");
    const vera = await h.user("Vera");
    const adam = await h.user("Adam");
    const team = await h.teamHub(bob, [[carl, "contributor"], [vera, "viewer"], [adam, "admin"]]);
    const bobs = (await bob.post("/v1/memories", { content: "bob's team note" }, { headers: { "x-hub-id": team } })).body.data;
    const carls = (await carl.post("/v1/memories", { content: "carl's team note" }, { headers: { "x-hub-id": team } })).body.data;
    expect((await carl.patch(`/v1/memories/${carls.id}`, { title: "mine" })).status).toBe(200);
    expect((await carl.patch(`/v1/memories/${bobs.id}`, { title: "theirs" })).status).toBe(403);
    expect((await vera.patch(`/v1/memories/${carls.id}`, { title: "viewer" })).status).toBe(403);
    expect((await adam.patch(`/v1/memories/${carls.id}`, { title: "admin edit" })).status).toBe(200);
    expect((await ann.patch(`/v1/memories/${carls.id}`, { title: "outsider" })).status).toBe(404);
  });

  test.skipIf(testPostgres())("a title edit the caller may not make reads none of the memory's chunks (their glosses are worked out after the access check)", async () => {
    const vera = await h.user("Vera");
    const team = await h.teamHub(bob, [[vera, "viewer"]]);
    const m = (await bob.post("/v1/memories", { content: "季度归档" }, { headers: { "x-hub-id": team } })).body.data;
    // A long Chinese note's chunks (as processing writes them), which a new title re-indexes with their glosses.
    const text = "每周检查一次安全阀。".repeat(2_000);
    const { replaceChunks } = await import("@/lib/recall/store-chunks.ts");
    await replaceChunks(h.db, { id: m.id, hubId: team }, Array.from({ length: 10 }, (_, position) => ({ position, content: text, headingChain: "", tokenCount: 300, embedding: null, gloss: "" })));
    for (const [caller, status] of [[vera, 403], [ann, 404]] as const) {
      let res: Awaited<ReturnType<Client["patch"]>> | undefined;
      const read = await charactersRead(h.database, async () => {
        res = await caller.patch(`/v1/memories/${m.id}`, { title: "Safety valves" });
      });
      expect(res!.status).toBe(status);
      // Before, the chunks' text (200,000 characters) was read and glossed before the 403 or 404.
      expect(read).toBeLessThan(20_000);
    }
    expect((await bob.patch(`/v1/memories/${m.id}`, { title: "Safety valves" })).status).toBe(200);
  });

  test.skipIf(testPostgres())("reads the stored text only when the edit needs it: not when the content is replaced, once (the answer's) for a tag edit", async () => {
    const old = `# Samples\n\n${randomBytes(300_000).toString("base64")}`;
    const m = (await ann.post("/v1/memories", { content: old })).body.data;
    let res: Awaited<ReturnType<Client["patch"]>> | undefined;
    const replacing = await charactersRead(h.database, async () => {
      res = await ann.patch(`/v1/memories/${m.id}`, { content: "# Samples\n\nThe short version." });
    });
    expect(res!.status).toBe(200);
    expect(replacing).toBeLessThan(old.length / 2);
    const again = (await ann.patch(`/v1/memories/${m.id}`, { content: old })).body.data;
    expect(again.version).toBe(3);
    const tagging = await charactersRead(h.database, async () => {
      res = await ann.patch(`/v1/memories/${m.id}`, { tags: ["lab"] });
    });
    expect(res!.body.data).toMatchObject({ tags: ["lab"], content: old });
    expect(tagging).toBeLessThan(old.length * 1.5);
    // A new hint reclassifies the stored text, so that one still reads it.
    expect((await ann.patch(`/v1/memories/${m.id}`, { hint: "a lab sample" })).body.data).toMatchObject({ hint: "a lab sample", content: old });
  });
});

describe("DELETE and batch operations", () => {
  test("DELETE hard-deletes with a data envelope; again is 404", async () => {
    const m = (await ann.post("/v1/memories", { content: "delete me" })).body.data;
    const res = await ann.delete(`/v1/memories/${m.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { id: m.id, deleted: true } });
    expect(await h.db.memory.findUnique({ where: { id: m.id } })).toBeNull();
    expect((await ann.delete(`/v1/memories/${m.id}`)).status).toBe(404);
  });

  test.skipIf(testPostgres())("DELETE reads what it checks, not the memory's whole text", async () => {
    const id = (await ann.post("/v1/memories", { content: `# Field log\n\n${"The heron count went on all morning. ".repeat(28_000)}` })).body.data.id;
    let res: Awaited<ReturnType<Client["delete"]>> | undefined;
    const read = await charactersRead(h.database, async () => {
      res = await ann.delete(`/v1/memories/${id}`);
    });
    expect(res!.status).toBe(200);
    expect(await h.db.memory.findUnique({ where: { id } })).toBeNull();
    // A memory of about 1 MB: the permission check read all of it.
    expect(read).toBeLessThan(50_000);
  });

  test("contributor_delete_policy decides contributors' deletes", async () => {
    const carl = await h.user("Carl");
    const none = await h.teamHub(bob, [[carl, "contributor"]], { contributorDeletePolicy: "none" });
    const any = await h.teamHub(bob, [[carl, "contributor"]], { contributorDeletePolicy: "any" });
    const own = await h.teamHub(bob, [[carl, "contributor"]]);
    const push = async (who: Client, hub: string, content: string) =>
      (await who.post("/v1/memories", { content }, { headers: { "x-hub-id": hub } })).body.data.id as string;
    expect((await carl.delete(`/v1/memories/${await push(carl, none, "n1")}`)).status).toBe(403);
    expect((await carl.delete(`/v1/memories/${await push(bob, any, "a1")}`)).status).toBe(200);
    expect((await carl.delete(`/v1/memories/${await push(carl, own, "o1")}`)).status).toBe(200);
    expect((await carl.delete(`/v1/memories/${await push(bob, own, "o2")}`)).status).toBe(403);
  });

  test("batch-delete deletes what it may and reports the rest", async () => {
    const vera = await h.user("Vera");
    const team = await h.teamHub(bob, [[vera, "viewer"]]);
    const mine = (await vera.post("/v1/memories", { content: "vera personal" })).body.data.id;
    const teamNote = (await bob.post("/v1/memories", { content: "team only" }, { headers: { "x-hub-id": team } })).body.data.id;
    const annNote = (await ann.post("/v1/memories", { content: "ann only" })).body.data.id;
    const res = await vera.post("/v1/memories/batch-delete", { ids: [mine, teamNote, annNote, "garbage", mine] });
    expect(res.status).toBe(200);
    expect(res.body.data.deleted).toBe(1);
    expect(res.body.data.skipped).toEqual([
      { id: teamNote, reason: "not_owned" },
      { id: annNote, reason: "not_found" },
      { id: "garbage", reason: "not_found" },
    ]);
    expect(await h.db.memory.count({ where: { id: { in: [teamNote, annNote] } } })).toBe(2);
  });

  test("batch limits: 1..100 ids", async () => {
    expect((await ann.post("/v1/memories/batch-delete", { ids: [] })).status).toBe(400);
    const tooMany = await ann.post("/v1/memories/batch-delete", { ids: Array.from({ length: 101 }, (_, i) => `id${i}`) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error.details.issues[0].path).toBe("ids");
    expect((await ann.post("/v1/memories/batch-move", { ids: ["x"] })).status).toBe(400);
  });

  test("batch-move reads a null hub_id or topic_id as absent: topic_id null with a hub_id takes the memories out of their topic", async () => {
    const team = await h.teamHub(ann);
    const topic = (await ann.post("/v1/topics", { name: "Filed", hub_id: team })).body.data;
    const m = (await ann.post("/v1/memories", { content: `filed, then not ${Math.random()}` }, { headers: { "x-hub-id": team } })).body.data.id;
    const filed = await ann.post("/v1/memories/batch-move", { ids: [m], hub_id: null, topic_id: topic.id });
    expect(filed.status, filed.text).toBe(200);
    expect(filed.body.data).toEqual({ moved: 1, skipped: [] });
    const cleared = await ann.post("/v1/memories/batch-move", { ids: [m], hub_id: team, topic_id: null });
    expect(cleared.status, cleared.text).toBe(200);
    expect(cleared.body.data).toEqual({ moved: 1, skipped: [] });
    expect((await ann.get(`/v1/memories/${m}`)).body.data).toMatchObject({ hub_id: team, topic_id: null });
    // Both null names no target, as both absent do.
    const neither = await ann.post("/v1/memories/batch-move", { ids: [m], hub_id: null, topic_id: null });
    expect(neither.status).toBe(400);
    expect(neither.body.error.details.issues[0].path).toBe("hub_id");
  });

  test("batch-move moves memories with their chunks to a hub and topic", async () => {
    const team = await h.teamHub(bob, [[ann, "contributor"]]);
    const topic = await h.db.topic.create({ data: { id: crypto.randomUUID(), hubId: team, name: "Runbooks" } });
    const a = (await ann.post("/v1/memories", { content: "move me 1" })).body.data.id;
    const b = (await ann.post("/v1/memories", { content: "move me 2", source_path: "x/y.md" })).body.data.id;
    await h.db.chunk.create({ data: { id: crypto.randomUUID(), memoryId: a, hubId: ann.personalHubId, position: 0, content: "move me 1" } });
    const bobs = (await bob.post("/v1/memories", { content: "bob's own" })).body.data.id;
    const res = await ann.post("/v1/memories/batch-move", { ids: [a, b, bobs], hub_id: team, topic_id: topic.id });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ moved: 2, skipped: [{ id: bobs, reason: "not_found" }] });
    const moved = await ann.get(`/v1/memories/${a}`);
    expect(moved.body.data).toMatchObject({ hub_id: team, topic_id: topic.id });
    expect((await h.db.chunk.findFirstOrThrow({ where: { memoryId: a } })).hubId).toBe(team);
    const listed = await ann.get(`/v1/memories?hub_id=${team}&topic_id=${topic.id}`);
    expect(listed.body.data.memories.map((m: { id: string }) => m.id).sort()).toEqual([a, b].sort());
  });

  test("batch-move checks the target: not a member 404, viewer 403, foreign topic 400", async () => {
    const vera = await h.user("Vera");
    const viewing = await h.teamHub(bob, [[vera, "viewer"]]);
    const other = await h.teamHub(bob, [[vera, "contributor"]]);
    const topic = await h.db.topic.create({ data: { id: crypto.randomUUID(), hubId: viewing, name: "T" } });
    const m = (await vera.post("/v1/memories", { content: "vera's" })).body.data.id;
    expect((await vera.post("/v1/memories/batch-move", { ids: [m], hub_id: await h.teamHub(bob) })).status).toBe(404);
    expect((await vera.post("/v1/memories/batch-move", { ids: [m], hub_id: viewing })).status).toBe(403);
    const foreignTopic = await vera.post("/v1/memories/batch-move", { ids: [m], hub_id: other, topic_id: topic.id });
    expect(foreignTopic.status).toBe(400);
    expect((await vera.post("/v1/memories/batch-move", { ids: [m], topic_id: crypto.randomUUID() })).status).toBe(404);
    expect((await vera.get(`/v1/memories/${m}`)).body.data.hub_id).toBe(vera.personalHubId);
  });

  test("moving into a hub that already has the source_path skips with conflict", async () => {
    const team = await h.teamHub(ann);
    await ann.post("/v1/memories", { content: "team copy", source_path: "dup/path.md" }, { headers: { "x-hub-id": team } });
    const personal = (await ann.post("/v1/memories", { content: "personal copy", source_path: "dup/path.md" })).body.data.id;
    const res = await ann.post("/v1/memories/batch-move", { ids: [personal], hub_id: team });
    expect(res.body.data).toEqual({ moved: 0, skipped: [{ id: personal, reason: "conflict" }] });
  });

  test("moving into a hub that already holds the same content skips with conflict, as a push there would not write it", async () => {
    const team = await h.teamHub(ann);
    const other = await h.teamHub(ann);
    const there = (await ann.post("/v1/memories", { content: "same words everywhere" }, { headers: { "x-hub-id": team } })).body.data.id;
    const personal = (await ann.post("/v1/memories", { content: "same words everywhere", source_path: "notes/same.md" })).body.data.id;
    const res = await ann.post("/v1/memories/batch-move", { ids: [personal], hub_id: team });
    expect(res.body.data).toEqual({ moved: 0, skipped: [{ id: personal, reason: "conflict" }] });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: personal } })).hubId).toBe(ann.personalHubId);
    expect(await h.db.memory.count({ where: { hubId: team, contentHash: sha256("same words everywhere") } })).toBe(1);
    expect((await ann.get(`/v1/memories/${there}`)).body.data.hub_id).toBe(team);
    // Two of one batch with the same content: the first moves, the second would duplicate it.
    const a = (await ann.post("/v1/memories", { content: "twin text" })).body.data.id;
    const b = (await ann.post("/v1/memories", { content: "twin text" }, { headers: { "x-hub-id": team } })).body.data.id;
    const twins = await ann.post("/v1/memories/batch-move", { ids: [a, b], hub_id: other });
    expect(twins.body.data).toEqual({ moved: 1, skipped: [{ id: b, reason: "conflict" }] });
    expect(await h.db.memory.count({ where: { hubId: other, contentHash: sha256("twin text") } })).toBe(1);
  });

  test("a memory whose content changes as the move begins is checked by its new content (the move starts again)", async () => {
    const team = await h.teamHub(ann);
    await ann.post("/v1/memories", { content: "what the team already has" }, { headers: { "x-hub-id": team } });
    const mine = (await ann.post("/v1/memories", { content: "a draft, for now" })).body.data.id;
    // The edit commits between the move's unlocked read of the contents to lock and its transaction.
    const edit = () => h.db.memory.update({ where: { id: mine }, data: { content: "what the team already has", contentHash: sha256("what the team already has") } });
    const ctx = sessionContext(h, ann, changedBefore(h.db, ["$transaction"], edit));
    expect(await batchMoveMemories(ctx, { ids: [mine], hub_id: team })).toEqual({ moved: 0, skipped: [{ id: mine, reason: "conflict" }] });
    expect(await h.db.memory.count({ where: { hubId: team, contentHash: sha256("what the team already has") } })).toBe(1);
  });

  test("an admin cannot move another member's memory into a hub that member is not in (owner_not_member)", async () => {
    const cleo = await h.user("Cleo");
    const dana = await h.user("Dana");
    const team = await h.teamHub(dana, [[cleo, "contributor"]]);
    const shared = await h.teamHub(dana, [[cleo, "viewer"]]);
    const cleos = (await cleo.post("/v1/memories", { content: "cleo's runbook" }, { headers: { "x-hub-id": team } })).body.data.id;
    const away = await dana.post("/v1/memories/batch-move", { ids: [cleos], hub_id: dana.personalHubId });
    expect(away.status).toBe(200);
    expect(away.body.data).toEqual({ moved: 0, skipped: [{ id: cleos, reason: "owner_not_member" }] });
    expect((await cleo.get(`/v1/memories/${cleos}`)).body.data.hub_id).toBe(team);
    // Into a hub its owner reads, the move goes ahead.
    const ok = await dana.post("/v1/memories/batch-move", { ids: [cleos], hub_id: shared });
    expect(ok.body.data).toEqual({ moved: 1, skipped: [] });
    expect((await cleo.get(`/v1/memories/${cleos}`)).body.data.hub_id).toBe(shared);
  });

  test("the owner's membership of the target is read under the move's lock: removed as the move begins, the memory stays", async () => {
    const eve = await h.user("Eve");
    const fay = await h.user("Fay");
    const team = await h.teamHub(fay, [[eve, "contributor"]]);
    const to = await h.teamHub(fay, [[eve, "viewer"]]);
    const eves = (await eve.post("/v1/memories", { content: "eve's checklist" }, { headers: { "x-hub-id": team } })).body.data.id;
    // Eve is a member when the move reads its target; her removal commits as its transaction begins.
    const ctx = sessionContext(h, fay, changedBefore(h.db, ["$transaction"], () => h.db.hubMember.delete({ where: { hubId_userId: { hubId: to, userId: eve.id } } })));
    expect(await batchMoveMemories(ctx, { ids: [eves], hub_id: to })).toEqual({ moved: 0, skipped: [{ id: eves, reason: "owner_not_member" }] });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: eves } })).hubId).toBe(team);
  });
});
