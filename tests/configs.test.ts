import { createHash, randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localDeleteConfig } from "@/lib/configs/ack-configs.ts";
import { pruneConfigDeletions } from "@/lib/configs/prune-config-deletions.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const file = { agent: "claude-code", file_path: "CLAUDE.md", scope: "global" };

/** Blocks of `table`'s out-of-line (TOAST) storage read so far: large content is stored there, so reading it shows here. */
async function toastBlocks(table: string): Promise<number> {
  await h.database.sql.exec("SELECT pg_stat_force_next_flush()");
  const [row] = await h.database.sql.query<{ blocks: number }>(
    "SELECT (coalesce(toast_blks_read, 0) + coalesce(toast_blks_hit, 0))::int AS blocks FROM pg_statio_user_tables WHERE relname = $1",
    [table],
  );
  return row!.blocks;
}

/** A device: a manifest of files it holds, and the CLI's sync → act → ack loop. */
class Device {
  files = new Map<string, string>();
  constructor(
    readonly client: Client,
    readonly id: string,
  ) {}
  manifest() {
    return [...this.files].map(([path, content]) => ({ ...file, file_path: path, content_hash: sha(content), updated_at: new Date().toISOString() }));
  }
  async plan() {
    const res = await this.client.post("/v1/configs/sync", { device_id: this.id, configs: this.manifest() });
    expect(res.status, res.text).toBe(200);
    return res.body.data.actions as { action: string; reason: string; file_path: string; config_id?: string; version?: number }[];
  }
  /** Carries out push, pull, unchanged and delete_local like `memax agents sync`; conflicts are returned. */
  async sync() {
    const actions = await this.plan();
    const acks: object[] = [];
    for (const a of actions) {
      if (a.action === "push") {
        const res = await this.client.put("/v1/configs", { ...file, file_path: a.file_path, content: this.files.get(a.file_path), device_id: this.id });
        expect([200, 201]).toContain(res.status);
      } else if (a.action === "pull") {
        const res = await this.client.get(`/v1/configs/${a.config_id}`);
        this.files.set(a.file_path, res.body.data.content);
        acks.push({ ...file, file_path: a.file_path, content_hash: res.body.data.content_hash, version: a.version });
      } else if (a.action === "unchanged" && this.files.has(a.file_path)) {
        acks.push({ ...file, file_path: a.file_path, content_hash: sha(this.files.get(a.file_path)!), version: a.version });
      } else if (a.action === "delete_local") {
        this.files.delete(a.file_path);
        acks.push({ ...file, file_path: a.file_path, version: a.version, deleted: true });
      }
    }
    if (acks.length) expect((await this.client.post("/v1/configs/ack", { device_id: this.id, configs: acks })).status).toBe(200);
    return actions;
  }
}

describe("PUT and GET /v1/configs", () => {
  it("stores versions, lists by agent and scope, and keeps the same content as one version", async () => {
    const ann = await h.user("Ann");
    const first = await ann.put("/v1/configs", { ...file, content: "# Rules\n" });
    expect(first.status, first.text).toBe(201);
    expect(first.body.data).toMatchObject({ ...file, owner_id: ann.id, content: "# Rules\n", content_hash: sha("# Rules\n"), version: 1 });
    const same = await ann.put("/v1/configs", { ...file, content: "# Rules\n" });
    expect(same.status).toBe(200);
    expect(same.body.data.version).toBe(1);
    const second = await ann.put("/v1/configs", { ...file, content: "# Rules v2\n" });
    expect(second.body.data).toMatchObject({ id: first.body.data.id, version: 2 });
    await ann.put("/v1/configs", { agent: "cursor", file_path: ".cursorrules", scope: "project:github.com/acme/app", content: "x" });
    const all = await ann.get("/v1/configs");
    expect(all.body.data.configs.map((c: { agent: string }) => c.agent)).toEqual(["claude-code", "cursor"]);
    expect(all.body.data).toMatchObject({ has_more: false, next_cursor: "" });
    const cursor = await ann.get("/v1/configs?agent=cursor&scope=project:github.com/acme/app");
    expect(cursor.body.data.configs).toHaveLength(1);
    expect((await ann.get("/v1/configs?scope=global")).body.data.configs).toHaveLength(1);
    const versions = await ann.get(`/v1/configs/${first.body.data.id}/versions`);
    expect(versions.body.data.versions.map((v: { version: number }) => v.version)).toEqual([2, 1]);
    expect(versions.body.data).toMatchObject({ has_more: false, next_cursor: "" });
    // Paginated like every list: one version a page, the cursor bound to this config's list.
    const page1 = await ann.get(`/v1/configs/${first.body.data.id}/versions?limit=1`);
    expect(page1.body.data).toMatchObject({ versions: [{ version: 2 }], has_more: true });
    const page2 = await ann.get(`/v1/configs/${first.body.data.id}/versions?limit=1&cursor=${page1.body.data.next_cursor}`);
    expect(page2.body.data).toMatchObject({ versions: [{ version: 1 }], has_more: false, next_cursor: "" });
    expect((await ann.get(`/v1/configs/${first.body.data.id}/versions?limit=0`)).body.error.code).toBe("invalid_limit");
    expect((await ann.get(`/v1/configs/${first.body.data.id}/versions?cursor=${(await ann.get("/v1/configs?limit=1")).body.data.next_cursor}`)).body.error?.code).toBe("invalid_cursor");
    // Another user sees none of it.
    const bob = await h.user("Bob");
    expect((await bob.get("/v1/configs")).body.data.configs).toEqual([]);
    expect((await bob.get(`/v1/configs/${first.body.data.id}`)).status).toBe(404);
    expect((await bob.delete(`/v1/configs/${first.body.data.id}`)).status).toBe(404);
  });

  it("lists versions without reading their content (sizes from the stored length)", async () => {
    const ann = await h.user("Versions");
    // Random text does not compress: each version is stored out of line (TOAST), so reading one shows in the table's TOAST block counts.
    const big = (n: number) => randomBytes(150 * 1024).toString("base64") + "é".repeat(n);
    const contents = [big(1), big(2), big(3)];
    let id = "";
    for (const content of contents) id = (await ann.put("/v1/configs", { ...file, file_path: "BIG.md", content })).body.data.id;
    const before = await toastBlocks("agent_config_versions");
    const versions = await ann.get(`/v1/configs/${id}/versions`);
    expect(versions.status, versions.text).toBe(200);
    expect(await toastBlocks("agent_config_versions")).toBe(before);
    expect(versions.body.data.versions).toMatchObject(
      [...contents].reverse().map((content, i) => ({ version: 3 - i, content_hash: sha(content), size_bytes: Buffer.byteLength(content, "utf8"), device_id: null })),
    );
    expect(versions.body.data.versions[0]).not.toHaveProperty("content");
    const older = await ann.get(`/v1/configs/${id}/versions?limit=2`);
    const rest = await ann.get(`/v1/configs/${id}/versions?limit=2&cursor=${older.body.data.next_cursor}`);
    expect(rest.body.data).toMatchObject({ versions: [{ version: 1, size_bytes: Buffer.byteLength(contents[0]!, "utf8") }], has_more: false });
  });

  it("lists deleted configs without reading their content", async () => {
    const ann = await h.user("Deleted list");
    const contents = [0, 1, 2].map(() => randomBytes(150 * 1024).toString("base64"));
    const ids: string[] = [];
    for (const [i, content] of contents.entries()) ids.push((await ann.put("/v1/configs", { ...file, file_path: `GONE-${i}.md`, content })).body.data.id);
    expect((await ann.post("/v1/configs/batch-delete", { ids })).body.data.deleted).toBe(3);
    const before = await toastBlocks("agent_configs");
    const deleted = await ann.get("/v1/configs/deleted");
    expect(deleted.status, deleted.text).toBe(200);
    expect(await toastBlocks("agent_configs")).toBe(before);
    expect(deleted.body.data.configs).toMatchObject([2, 1, 0].map((i) => ({ file_path: `GONE-${i}.md`, deleted_content_hash: sha(contents[i]!), version: 2 })));
  });

  it("pages with a cursor", async () => {
    const ann = await h.user("Pager");
    for (const name of ["a.md", "b.md", "c.md"]) await ann.put("/v1/configs", { ...file, agent: "codex", file_path: name, content: name });
    const one = await ann.get("/v1/configs?limit=2");
    expect(one.body.data.configs.map((c: { file_path: string }) => c.file_path)).toEqual(["a.md", "b.md"]);
    expect(one.body.data.has_more).toBe(true);
    const two = await ann.get(`/v1/configs?limit=2&cursor=${encodeURIComponent(one.body.data.next_cursor)}`);
    expect(two.body.data.configs.map((c: { file_path: string }) => c.file_path)).toEqual(["c.md"]);
    expect((await ann.get("/v1/configs?cursor=nope")).status).toBe(400);
  });

  it("cuts a page at 8 MiB of content, so a page of large files never needs the whole account in memory", async () => {
    const ann = await h.user("Heavy");
    const content = "\u0001".repeat(512 * 1024);
    await h.db.agentConfig.createMany({
      data: Array.from({ length: 20 }, (_, i) => ({
        id: randomUUID(),
        ownerId: ann.id,
        agent: "heavy",
        filePath: `big-${String(i).padStart(2, "0")}.md`,
        scope: "global",
        content,
        contentHash: sha(content),
        sizeBytes: 512 * 1024,
      })),
    });
    await ann.put("/v1/configs", { ...file, agent: "heavy", file_path: "small.md", content: "small" });
    const first = await ann.get("/v1/configs?limit=500");
    expect(first.status, first.text.slice(0, 200)).toBe(200);
    expect(first.body.data.configs).toHaveLength(16);
    expect(first.body.data.has_more).toBe(true);
    const second = await ann.get(`/v1/configs?limit=500&cursor=${encodeURIComponent(first.body.data.next_cursor)}`);
    expect(second.body.data).toMatchObject({ has_more: false, next_cursor: "" });
    const paths = [...first.body.data.configs, ...second.body.data.configs].map((c: { file_path: string; content: string }) => c.file_path);
    expect(paths).toEqual([...Array.from({ length: 20 }, (_, i) => `big-${String(i).padStart(2, "0")}.md`), "small.md"]);
    expect(second.body.data.configs.at(-1)).toMatchObject({ content: "small" });
    // The count limit still applies.
    expect((await ann.get("/v1/configs?agent=heavy&limit=2")).body.data.configs).toHaveLength(2);
  });

  it("rejects files over 512 KiB and bad identities, writing nothing", async () => {
    const ann = await h.user("Big");
    const big = await ann.put("/v1/configs", { ...file, content: "x".repeat(512 * 1024 + 1) });
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe("file_too_large");
    expect((await ann.put("/v1/configs", { ...file, content: "x".repeat(512 * 1024) })).status).toBe(201);
    for (const bad of [{ file_path: "../etc/passwd" }, { file_path: "/abs" }, { scope: "elsewhere" }, { scope: "profile:../x" }, { agent: "" }]) {
      const res = await ann.put("/v1/configs", { ...file, ...bad, content: "x" });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    expect((await ann.get("/v1/configs")).body.data.configs).toHaveLength(1);
    expect((await h.anonymous.get("/v1/configs")).status).toBe(401);
  });

  it("bounds file_path and scope in bytes too: a long non-ASCII identity is a 400, not the index's 500", async () => {
    const ann = await h.user("Wide");
    // Three bytes a character: within the character limits, past what one index entry of the (owner, agent, file_path, scope) key holds.
    const cjk = (n: number) => Array.from({ length: n }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919) % 0x5000))).join("");
    const wide = await ann.put("/v1/configs", { ...file, file_path: cjk(512), scope: `project:${cjk(592)}`, content: "x" });
    expect(wide.status, wide.text).toBe(400);
    expect(wide.body.error.code).toBe("invalid_request");
    expect(wide.body.error.details.issues.map((i: { path: string }) => i.path).sort()).toEqual(["file_path", "scope"]);
    // The same names in ASCII, and non-ASCII names within the byte bounds, are stored.
    expect((await ann.put("/v1/configs", { ...file, file_path: "f".repeat(512), scope: `project:${"p".repeat(592)}`, content: "x" })).status).toBe(201);
    const fits = await ann.put("/v1/configs", { ...file, file_path: cjk(341), scope: `project:${cjk(397)}`, content: "x" });
    expect(fits.status, fits.text).toBe(201);
    expect((await ann.post("/v1/configs/sync", { device_id: "d", configs: [] })).body.data.actions).toHaveLength(2);
  });

  it("names stored before the byte bounds (within the character limits) still sync, ack, list, update, delete and restore", async () => {
    const ann = await h.user("OldWide");
    const cjk = (n: number) => Array.from({ length: n }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919) % 0x5000))).join("");
    // As an older server stored them: a 512-character CJK path (1,536 bytes) in global, and a project id
    // of 592 such characters (1,784 bytes), each within what the index entry holds.
    const names = [
      { ...file, file_path: cjk(512), scope: "global" },
      { ...file, file_path: "AGENTS.md", scope: `project:${cjk(592)}` },
    ];
    const content = "kept from before";
    await h.db.agentConfig.createMany({
      data: names.map((n) => ({ id: randomUUID(), ownerId: ann.id, agent: n.agent, filePath: n.file_path, scope: n.scope, content, contentHash: sha(content), sizeBytes: content.length })),
    });
    const synced = await ann.post("/v1/configs/sync", { device_id: "d", configs: names.map((n) => ({ ...n, content_hash: sha(content) })) });
    expect(synced.status, synced.text).toBe(200);
    expect(synced.body.data.actions.map((a: { action: string }) => a.action)).toEqual(["unchanged", "unchanged"]);
    const acked = await ann.post("/v1/configs/ack", { device_id: "d", configs: names.map((n) => ({ ...n, content_hash: sha(content), version: 1 })) });
    expect(acked.status, acked.text).toBe(200);
    const listed = await ann.get(`/v1/configs?scope=${encodeURIComponent(names[1]!.scope)}`);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data.configs.map((c: { file_path: string }) => c.file_path)).toEqual(["AGENTS.md"]);
    // A new version of such a file fits the index entry its name already has.
    const updated = await ann.put("/v1/configs", { ...names[0], content: "edited", device_id: "d" });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.body.data.version).toBe(2);
    const local = await ann.post("/v1/configs/local-delete", { device_id: "d", ...names[1] });
    expect(local.status, local.text).toBe(200);
    expect((await ann.delete(`/v1/configs/${updated.body.data.id}`)).status).toBe(200);
    const restored = await ann.post("/v1/configs/restore", names[0]);
    expect(restored.status, restored.text).toBe(200);
    // A new name is held to the index entry's budget, whatever its two parts take of it.
    const longest = { agent: "a".repeat(64), file_path: cjk(512), scope: `project:${cjk(338)}`, content: "x" };
    const fits = await ann.put("/v1/configs", longest);
    expect(fits.status, fits.text).toBe(201);
    const over = await ann.put("/v1/configs", { ...longest, scope: `project:${cjk(339)}` });
    expect(over.status, over.text).toBe(400);
    expect(over.body.error.message).toMatch(/together at most 2560 bytes/);
    expect(over.body.error.details.issues.map((i: { path: string }) => i.path).sort()).toEqual(["file_path", "scope"]);
    // Past that budget but within the index entry (a short agent leaves room), as an older server could
    // store it: its edits are still taken, as the entry exists already.
    const wideOld = { agent: "claude-code", file_path: cjk(512), scope: `project:${cjk(350)}` };
    await h.db.agentConfig.create({ data: { id: randomUUID(), ownerId: ann.id, agent: wideOld.agent, filePath: wideOld.file_path, scope: wideOld.scope, content, contentHash: sha(content), sizeBytes: content.length } });
    const edited = await ann.put("/v1/configs", { ...wideOld, content: "edited past the budget" });
    expect(edited.status, edited.text).toBe(200);
    expect(edited.body.data.version).toBe(2);
  });
});

describe("the per-user cap of 500 configs", () => {
  it("counts deleted configs only while they can be restored, and a file pushed over an expired deletion needs a free slot", async () => {
    const ann = await h.user("Capped");
    const day = 86_400_000;
    const deletionRecords = (expiresAt: Date) =>
      Array.from({ length: 500 }, (_, i) => ({
        id: randomUUID(),
        ownerId: ann.id,
        agent: "old-agent",
        filePath: `gone-${i}.md`,
        scope: "global",
        content: "x",
        contentHash: sha("x"),
        sizeBytes: 1,
        version: 2,
        deletedAt: new Date(expiresAt.getTime() - 30 * day),
        contentExpiresAt: expiresAt,
      }));
    // 500 files deleted 40 days ago, past their restore window: they hold no slot.
    await h.db.agentConfig.createMany({ data: deletionRecords(new Date(Date.now() - 10 * day)) });
    const fresh = await ann.put("/v1/configs", { ...file, content: "new file" });
    expect(fresh.status, fresh.text).toBe(201);
    // 500 deleted yesterday, still restorable: the account is full.
    await h.db.agentConfig.createMany({ data: deletionRecords(new Date(Date.now() + 29 * day)).map((row) => ({ ...row, agent: "recent-agent" })) });
    const full = await ann.put("/v1/configs", { ...file, file_path: "AGENTS.md", content: "one too many" });
    expect(full.status, full.text).toBe(409);
    expect(full.body.error).toMatchObject({ code: "conflict", details: { limit: 500 } });
    // A name that could never be stored is said first, not the full account.
    const wide = String.fromCodePoint(0x4e00).repeat(512);
    const unstorable = await ann.put("/v1/configs", { ...file, file_path: wide, scope: `project:${wide}`, content: "x" });
    expect([unstorable.status, unstorable.body.error.code]).toEqual([400, "invalid_request"]);
    // Pushing over an expired deletion record is a new file again, so it needs a slot as well.
    const revived = await ann.put("/v1/configs", { ...file, agent: "old-agent", file_path: "gone-0.md", content: "back" });
    expect(revived.status, revived.text).toBe(409);
    // Changing a live file needs no new slot.
    expect((await ann.put("/v1/configs", { ...file, content: "new file, edited" })).status).toBe(200);
  });
});

describe("the per-user cap on stored config bytes", () => {
  // 500 files x 50 kept versions x 512 KiB could be stored for one account (12.5 GiB): every version
  // kept, of live files and of deleted ones while restorable, now counts toward one cap.
  it("refuses a write past it (413 quota_exceeded), allows one that stores no more, and counts restores and persona restores too", async () => {
    process.env.ENGRAM_QUOTA_USER_CONFIG_BYTES = "100k";
    try {
      const bea = await h.user("ByteCapped");
      const kib = (n: number, fill = "a") => fill.repeat(n * 1024);
      expect((await bea.put("/v1/configs", { ...file, file_path: "a.md", content: kib(40) })).status).toBe(201);
      expect((await bea.put("/v1/configs", { ...file, file_path: "b.md", content: kib(40) })).status).toBe(201);
      const over = await bea.put("/v1/configs", { ...file, file_path: "c.md", content: kib(30) });
      expect(over.status, JSON.stringify(over.body.error)).toBe(413);
      expect(over.body.error).toMatchObject({ code: "quota_exceeded", details: { resource: "config_bytes", limit: 100 * 1024, used: 80 * 1024, requested: 30 * 1024 } });
      expect(await h.db.agentConfig.count({ where: { ownerId: bea.id, filePath: "c.md" } })).toBe(0);
      // A new version of a file adds to its history: refused as well, the file left as it was.
      const edited = await bea.put("/v1/configs", { ...file, file_path: "a.md", content: kib(30, "b") });
      expect(edited.status).toBe(413);
      expect((await bea.get("/v1/configs?limit=10")).body.data.configs.find((c: { file_path: string }) => c.file_path === "a.md").version).toBe(1);
      // What fits still goes in.
      const c = await bea.put("/v1/configs", { ...file, file_path: "c.md", content: kib(15) });
      expect(c.status).toBe(201);
      // A deleted file keeps its bytes while restorable; its restore adds a version and needs room.
      const b = (await bea.get("/v1/configs?limit=10")).body.data.configs.find((c: { file_path: string }) => c.file_path === "b.md");
      expect((await bea.delete(`/v1/configs/${b.id}`)).status).toBe(200);
      const restored = await bea.post("/v1/configs/restore", { agent: file.agent, file_path: "b.md", scope: "global" });
      expect(restored.status, JSON.stringify(restored.body.error)).toBe(413);
      // A persona restore writes a version too.
      const soul = await bea.put("/v1/configs", { ...file, file_path: "SOUL.md", content: "# Sage" });
      expect(soul.status).toBe(201);
      expect((await bea.put("/v1/configs", { ...file, file_path: "SOUL.md", content: "# Sage 2" })).status).toBe(200);
      await h.db.$executeRawUnsafe(`UPDATE agent_config_versions SET content = '# Sage' || repeat('z', 4096) WHERE config_id = $1::uuid AND version = 1`, soul.body.data.id);
      const back = await bea.post(`/v1/personas/${soul.body.data.id}/revisions/1/restore`, {});
      expect(back.status, JSON.stringify(back.body.error)).toBe(413);
      // Past the cap (lowered), a write that leaves the total no larger still goes: c.md's history is
      // full, so its next version drops the oldest (15 KiB).
      const configId = c.body.data.id as string;
      await h.db.agentConfigVersion.createMany({ data: Array.from({ length: 49 }, (_, i) => ({ id: randomUUID(), configId, version: i + 2, content: `v${i + 2}`, contentHash: sha(`v${i + 2}`) })) });
      await h.db.agentConfig.update({ where: { id: configId }, data: { version: 50, content: "v50", contentHash: sha("v50") } });
      process.env.ENGRAM_QUOTA_USER_CONFIG_BYTES = "10k";
      expect((await bea.put("/v1/configs", { ...file, file_path: "SOUL.md", content: "# Sage 3" })).status).toBe(413);
      const smaller = await bea.put("/v1/configs", { ...file, file_path: "c.md", content: "v51" });
      expect(smaller.status, JSON.stringify(smaller.body.error)).toBe(200);
      expect(smaller.body.data.version).toBe(51);
    } finally {
      delete process.env.ENGRAM_QUOTA_USER_CONFIG_BYTES;
    }
  });
});

describe("deletion records past their retention", () => {
  it("are purged by the periodic prune with their versions and device states; restorable ones and live files stay", async () => {
    const ann = await h.user("Purged");
    const a = new Device(ann, "a");
    a.files.set("OLD.md", "old v1");
    await a.sync();
    a.files.set("OLD.md", "old v2");
    await a.sync();
    a.files.set("RECENT.md", "recent");
    a.files.set("LIVE.md", "live");
    await a.sync();
    const list = (await ann.get("/v1/configs")).body.data.configs as { id: string; file_path: string }[];
    const id = (path: string) => list.find((c) => c.file_path === path)!.id;
    expect((await ann.post("/v1/configs/batch-delete", { ids: [id("OLD.md"), id("RECENT.md")] })).body.data.deleted).toBe(2);
    // OLD.md was deleted 31 days ago: past its restore window.
    const day = 86_400_000;
    await h.db.agentConfig.update({ where: { id: id("OLD.md") }, data: { deletedAt: new Date(Date.now() - 31 * day), contentExpiresAt: new Date(Date.now() - day) } });
    expect((await ann.post("/v1/configs/restore", { ...file, file_path: "OLD.md" })).status).toBe(410);

    expect(await pruneConfigDeletions(h.database)).toBeGreaterThanOrEqual(1);
    expect(await h.db.agentConfig.findUnique({ where: { id: id("OLD.md") } })).toBeNull();
    expect(await h.db.agentConfigVersion.count({ where: { configId: id("OLD.md") } })).toBe(0);
    expect(await h.db.agentConfigDevice.count({ where: { configId: id("OLD.md") } })).toBe(0);
    expect((await h.db.agentConfig.findMany({ where: { ownerId: ann.id }, orderBy: { filePath: "asc" } })).map((c) => [c.filePath, c.deletedAt !== null])).toEqual([
      ["LIVE.md", false],
      ["RECENT.md", true],
    ]);
    expect((await ann.get("/v1/configs/deleted")).body.data.configs).toMatchObject([{ file_path: "RECENT.md" }]);
    expect((await ann.post("/v1/configs/restore", { ...file, file_path: "OLD.md" })).status).toBe(404);
    // The same file pushed again is a new file.
    const again = await ann.put("/v1/configs", { ...file, file_path: "OLD.md", content: "again" });
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.version).toBe(1);
  });
});

describe("a persona's deletion record past its retention", () => {
  it("is pruned with the default persona that named it: the settings no longer name a config gone for good", async () => {
    const pia = await h.user("Pruned persona");
    const persona = await pia.put("/v1/configs", { ...file, file_path: "SOUL.md", content: "# Captain\nSpeak like a ship's captain." });
    expect(persona.status, persona.text).toBe(201);
    const id = persona.body.data.id as string;
    expect((await pia.patch("/v1/settings", { theme: "dark", chat_default_persona_id: id })).status).toBe(200);
    expect((await pia.post("/v1/configs/batch-delete", { ids: [id] })).body.data.deleted).toBe(1);
    const day = 86_400_000;
    await h.db.agentConfig.update({ where: { id }, data: { deletedAt: new Date(Date.now() - 31 * day), contentExpiresAt: new Date(Date.now() - day) } });

    expect(await pruneConfigDeletions(h.database)).toBeGreaterThanOrEqual(1);
    expect(await h.db.agentConfig.findUnique({ where: { id } })).toBeNull();
    expect((await pia.get("/v1/settings")).body.data).toMatchObject({ theme: "dark", chat_default_persona_id: "" });
  });
});

describe("POST /v1/configs/sync between two devices", () => {
  it("a pull that fetched a newer version than its plan named is acknowledged as the version it holds: the next edit there is pushed, not a conflict", async () => {
    const ann = await h.user("Late pull");
    const laptop = new Device(ann, "laptop");
    const desktop = new Device(ann, "desktop");
    laptop.files.set("CLAUDE.md", "v1");
    await laptop.sync();
    await desktop.sync();
    laptop.files.set("CLAUDE.md", "v2");
    await laptop.sync();
    const [plan] = await desktop.plan();
    expect(plan).toMatchObject({ action: "pull", reason: "cloud_newer", version: 2 });
    // The laptop pushes again between the desktop's plan and its fetch.
    laptop.files.set("CLAUDE.md", "v3");
    expect(await laptop.sync()).toMatchObject([{ action: "push", reason: "local_newer" }]);
    // As memax agents sync does: the fetched file's hash, the plan's version.
    const fetched = (await ann.get(`/v1/configs/${plan!.config_id}`)).body.data;
    expect(fetched).toMatchObject({ version: 3, content: "v3" });
    desktop.files.set("CLAUDE.md", fetched.content);
    const ack = await ann.post("/v1/configs/ack", { device_id: "desktop", configs: [{ ...file, content_hash: fetched.content_hash, version: plan!.version }] });
    expect(ack.body.data).toEqual({ acknowledged: 1, skipped: [] });
    // Edited in turn: the desktop's change is newer than what it pulled, and the cloud has not changed since.
    desktop.files.set("CLAUDE.md", "v4 from desktop");
    expect(await desktop.sync()).toMatchObject([{ action: "push", reason: "local_newer" }]);
    expect(await laptop.sync()).toMatchObject([{ action: "pull", reason: "cloud_newer", version: 4 }]);
    expect(laptop.files.get("CLAUDE.md")).toBe("v4 from desktop");
  });

  it("edits in turn travel; edits at once conflict; the clock is never consulted", async () => {
    const ann = await h.user("Sync");
    const laptop = new Device(ann, "laptop");
    const desktop = new Device(ann, "desktop");
    laptop.files.set("CLAUDE.md", "v1");
    expect(await laptop.sync()).toMatchObject([{ action: "push", reason: "local_only" }]);
    expect(await desktop.sync()).toMatchObject([{ action: "pull", reason: "cloud_only", version: 1 }]);
    expect(desktop.files.get("CLAUDE.md")).toBe("v1");
    // In turn: desktop edits and syncs, then laptop pulls.
    desktop.files.set("CLAUDE.md", "v2 from desktop");
    expect(await desktop.sync()).toMatchObject([{ action: "push", reason: "local_newer" }]);
    expect(await laptop.sync()).toMatchObject([{ action: "pull", reason: "cloud_newer", version: 2 }]);
    expect(laptop.files.get("CLAUDE.md")).toBe("v2 from desktop");
    expect(await laptop.sync()).toMatchObject([{ action: "unchanged", reason: "in_sync" }]);
    // At once: both edit before either syncs.
    laptop.files.set("CLAUDE.md", "v3 laptop");
    desktop.files.set("CLAUDE.md", "v3 desktop");
    expect(await laptop.sync()).toMatchObject([{ action: "push", reason: "local_newer" }]);
    expect(await desktop.sync()).toMatchObject([{ action: "conflict", reason: "both_changed", config_id: expect.any(String) }]);
    // A manifest timestamp far in the future or past changes nothing.
    for (const updated_at of ["2099-01-01T00:00:00Z", "1970-01-01T00:00:00Z"]) {
      const res = await ann.post("/v1/configs/sync", { device_id: "desktop", configs: [{ ...file, content_hash: sha("v3 desktop"), updated_at }] });
      expect(res.body.data.actions).toMatchObject([{ action: "conflict", reason: "both_changed" }]);
    }
    // Keep local resolves it; the laptop then pulls the desktop's text.
    await ann.put("/v1/configs", { ...file, content: "v3 desktop", device_id: "desktop" });
    expect(await desktop.sync()).toMatchObject([{ action: "unchanged" }]);
    expect(await laptop.sync()).toMatchObject([{ action: "pull", reason: "cloud_newer", version: 4 }]);
  });

  it("batch-delete takes a config's id in any case: named twice in two cases it is one deletion, not a not_found skip", async () => {
    const ann = await h.user("CaseDeleter");
    const id = (await ann.put("/v1/configs", { ...file, content: "shout", device_id: "a" })).body.data.id as string;
    const res = await ann.post("/v1/configs/batch-delete", { ids: [id.toUpperCase(), id] });
    expect(res.body.data).toEqual({ deleted: 1, skipped: [] });
  });

  it("batch-delete bounds each id as other id fields are: a 1 MB id is a 400 naming the field, not skipped and echoed back whole", async () => {
    const ann = await h.user("LongIdDeleter");
    const res = await ann.post("/v1/configs/batch-delete", { ids: ["x".repeat(1024 * 1024)] });
    expect(res.status, res.text.slice(0, 200)).toBe(400);
    expect(res.text.length).toBeLessThan(2000);
    expect(res.body.error.details.issues).toMatchObject([{ path: "ids.0" }]);
    expect((await ann.post("/v1/configs/batch-delete", { ids: [""] })).status).toBe(400);
    // An id of ordinary length that names nothing is still a skip, as before.
    expect((await ann.post("/v1/configs/batch-delete", { ids: ["nope"] })).body.data).toEqual({ deleted: 0, skipped: [{ id: "nope", reason: "not_found" }] });
  });

  it("a deletion everywhere reaches the other device; a local change to the deleted file conflicts; restore brings it back", async () => {
    const ann = await h.user("Deleter");
    const a = new Device(ann, "a");
    const b = new Device(ann, "b");
    a.files.set("CLAUDE.md", "keep me");
    a.files.set("MEMORY.md", "notes");
    await a.sync();
    await b.sync();
    const list = (await ann.get("/v1/configs")).body.data.configs as { id: string; file_path: string; version: number }[];
    const claude = list.find((c) => c.file_path === "CLAUDE.md")!;
    const memory = list.find((c) => c.file_path === "MEMORY.md")!;
    const res = await ann.post("/v1/configs/batch-delete", { ids: [claude.id, memory.id, "00000000-0000-7000-8000-000000000000"] });
    expect(res.body.data).toEqual({ deleted: 2, skipped: [{ id: "00000000-0000-7000-8000-000000000000", reason: "not_found" }] });
    // A acks the deletion as the CLI does (version + 1).
    await ann.post("/v1/configs/ack", { device_id: "a", configs: [{ ...file, version: claude.version + 1, deleted: true }, { ...file, file_path: "MEMORY.md", version: memory.version + 1, deleted: true }] });
    a.files.clear();
    b.files.set("MEMORY.md", "notes, edited on b");
    const plan = await b.sync();
    expect(plan).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ file_path: "CLAUDE.md", action: "delete_local", reason: "deleted_in_cloud", version: 2 }),
        expect.objectContaining({ file_path: "MEMORY.md", action: "conflict", reason: "modified_locally_deleted_in_cloud" }),
      ]),
    );
    expect(plan.find((p) => p.file_path === "MEMORY.md")!.config_id).toBeUndefined();
    expect(b.files.has("CLAUDE.md")).toBe(false);
    expect(await a.sync()).toEqual([]);
    expect((await ann.get("/v1/configs")).body.data.configs).toEqual([]);
    const deleted = await ann.get("/v1/configs/deleted");
    expect(deleted.body.data.configs).toHaveLength(2);
    expect(deleted.body.data).toMatchObject({ has_more: false, next_cursor: "" });
    const firstDeleted = await ann.get("/v1/configs/deleted?limit=1");
    expect(firstDeleted.body.data).toMatchObject({ configs: [{ file_path: deleted.body.data.configs[0].file_path }], has_more: true });
    const secondDeleted = await ann.get(`/v1/configs/deleted?limit=1&cursor=${firstDeleted.body.data.next_cursor}`);
    expect(secondDeleted.body.data).toMatchObject({ configs: [{ file_path: deleted.body.data.configs[1].file_path }], has_more: false, next_cursor: "" });
    expect(deleted.body.data.configs[0]).toMatchObject({ agent: "claude-code", version: 2, deleted_content_hash: expect.any(String), content_expires_at: expect.any(String) });
    const restored = await ann.post("/v1/configs/restore", { agent: "claude-code", file_path: "CLAUDE.md", scope: "global", device_id: "a" });
    expect(restored.status, restored.text).toBe(200);
    expect(restored.body.data).toMatchObject({ content: "keep me", version: 3 });
    expect((await ann.post("/v1/configs/restore", { agent: "claude-code", file_path: "CLAUDE.md" })).status).toBe(409);
    // Both devices get it back as a cloud-only file.
    expect(await a.sync()).toMatchObject([{ file_path: "CLAUDE.md", action: "pull", reason: "cloud_only" }]);
    // A file created again after an acknowledged deletion is pushed, not deleted.
    const c = new Device(ann, "c");
    await ann.post("/v1/configs/ack", { device_id: "c", configs: [{ ...file, file_path: "MEMORY.md", version: 2, deleted: true }] });
    c.files.set("MEMORY.md", "brand new");
    expect(await c.plan()).toEqual(expect.arrayContaining([expect.objectContaining({ file_path: "MEMORY.md", action: "push", reason: "recreated_after_delete" })]));
  });

  it("restore reads the content of the one config it restores, not of the file's copies in every other scope", async () => {
    const ann = await h.user("Restorer");
    for (const i of [1, 2, 3]) await ann.put("/v1/configs", { ...file, scope: `project:p${i}`, content: randomBytes(150 * 1024).toString("base64") });
    const small = await ann.put("/v1/configs", { ...file, content: "small rules" });
    await ann.delete(`/v1/configs/${small.body.data.id}`);
    const before = await toastBlocks("agent_configs");
    const restored = await ann.post("/v1/configs/restore", { agent: file.agent, file_path: file.file_path });
    expect(restored.status, restored.text).toBe(200);
    expect(restored.body.data).toMatchObject({ scope: "global", content: "small rules", version: 3 });
    expect(await toastBlocks("agent_configs")).toBe(before);
  });

  it("local-delete keeps a file off one device only", async () => {
    const ann = await h.user("Local");
    const a = new Device(ann, "a");
    const b = new Device(ann, "b");
    a.files.set("CLAUDE.md", "shared");
    await a.sync();
    await b.sync();
    const res = await ann.post("/v1/configs/local-delete", { ...file, device_id: "b" });
    expect(res.status, res.text).toBe(200);
    b.files.clear();
    expect(await b.sync()).toMatchObject([{ action: "unchanged", reason: "removed_on_device" }]);
    a.files.set("CLAUDE.md", "shared v2");
    expect(await a.sync()).toMatchObject([{ action: "push" }]);
    expect(await b.sync()).toMatchObject([{ action: "unchanged", reason: "removed_on_device" }]);
    expect((await ann.post("/v1/configs/local-delete", { ...file, file_path: "NOPE.md", device_id: "b" })).status).toBe(404);
  });

  it("a PUT of the content the file already has reads none of the stored content: the hash tells it is unchanged", async () => {
    const ann = await h.user("SamePusher");
    const content = randomBytes(150 * 1024).toString("base64");
    const first = await ann.put("/v1/configs", { ...file, content, device_id: "a" });
    expect(first.status).toBe(201);
    const before = await toastBlocks("agent_configs");
    const again = await ann.put("/v1/configs", { ...file, content, device_id: "b" });
    expect(again.status, again.text).toBe(200);
    expect(again.body.data).toEqual(first.body.data);
    expect(await toastBlocks("agent_configs")).toBe(before);
    const changed = await ann.put("/v1/configs", { ...file, content: "short now", device_id: "b" });
    expect(changed.body.data).toMatchObject({ content: "short now", version: 2, size_bytes: 9 });
  });

  it("local-delete reads none of the file's content: it records the device's state by version and hash", async () => {
    const ann = await h.user("LocalBig");
    const content = randomBytes(150 * 1024).toString("base64");
    expect((await ann.put("/v1/configs", { ...file, content, device_id: "a" })).status).toBe(201);
    const before = await toastBlocks("agent_configs");
    const res = await ann.post("/v1/configs/local-delete", { ...file, device_id: "a" });
    expect(res.body.data, res.text).toEqual({ ...file, device_id: "a", removed: true });
    expect(await toastBlocks("agent_configs")).toBe(before);
    const state = await h.db.agentConfigDevice.findFirstOrThrow({ where: { deviceId: "a", config: { ownerId: ann.id } } });
    expect(state).toMatchObject({ syncedVersion: 1, syncedHash: sha(content), removed: true });
  });

  describe("local-delete racing a delete of the file", () => {
    let lou: Client;
    const push = async (path: string) => {
      const res = await lou.put("/v1/configs", { ...file, file_path: path, content: `# ${path}\n` });
      expect(res.status, res.text).toBeLessThan(300);
      return res.body.data.id as string;
    };
    // The change commits after local-delete's check and before its write.
    const localDelete = (path: string, change: () => Promise<unknown>) =>
      localDeleteConfig(sessionContext(h, lou, changedBefore(h.db, ["$transaction", "$queryRaw"], change)), { ...file, file_path: path, device_id: "lou-laptop" });
    beforeAll(async () => {
      lou = await h.user("Lou");
    });

    it("is not_found for a file deleted after the check, recording no removal at a stale version", async () => {
      const deleted = await push("DELETED.md");
      await expect(localDelete("DELETED.md", () => lou.delete(`/v1/configs/${deleted}`))).rejects.toMatchObject({ code: "not_found" });
      expect(await h.db.agentConfigDevice.count({ where: { configId: deleted } })).toBe(0);
    });

    it("is not_found, not a 500 from the device state's foreign key, when the deletion record was pruned too", async () => {
      const pruned = await push("PRUNED.md");
      const deleteAndPrune = async () => {
        await lou.delete(`/v1/configs/${pruned}`);
        await pruneConfigDeletions(h.database, new Date(Date.now() + 365 * 86_400_000));
      };
      await expect(localDelete("PRUNED.md", deleteAndPrune)).rejects.toMatchObject({ code: "not_found" });
    });
  });

  it("keeps the sync state of a config's 100 most recently synced devices, whatever device ids a client makes up", async () => {
    const ann = await h.user("Devices");
    const a = new Device(ann, "a");
    a.files.set("CLAUDE.md", "shared");
    await a.sync();
    const configId = (await ann.get("/v1/configs")).body.data.configs[0].id as string;
    // 99 more devices synced it earlier than a, each a minute apart.
    const start = Date.now() - 200 * 60_000;
    await h.db.agentConfigDevice.createMany({
      data: Array.from({ length: 99 }, (_, i) => ({ configId, deviceId: `old-${i}`, syncedVersion: 1, syncedHash: sha("shared"), updatedAt: new Date(start + i * 60_000) })),
    });
    await ann.post("/v1/configs/ack", { device_id: "a", configs: [{ ...file, content_hash: sha("shared"), version: 1 }] });
    const fresh = await ann.put("/v1/configs", { ...file, content: "shared", device_id: "fresh" });
    expect(fresh.status, fresh.text).toBe(200);
    const devices = async () => (await h.db.agentConfigDevice.findMany({ where: { configId }, select: { deviceId: true } })).map((d) => d.deviceId);
    expect(await devices()).toHaveLength(100);
    expect(await devices()).not.toContain("old-0");
    expect(await devices()).toEqual(expect.arrayContaining(["a", "fresh", "old-1", "old-98"]));
    // A known device syncing again takes no one's place.
    await ann.post("/v1/configs/local-delete", { ...file, device_id: "old-1" });
    expect(await devices()).toHaveLength(100);
    expect(await devices()).toContain("old-1");
    // Another new device through ack: the least recently synced one goes.
    const acked = await ann.post("/v1/configs/ack", { device_id: "newer", configs: [{ ...file, content_hash: sha("shared"), version: 1, local_path: "/home/ann/CLAUDE.md" }] });
    expect(acked.body.data, acked.text).toEqual({ acknowledged: 1, skipped: [] });
    expect(await devices()).toHaveLength(100);
    expect(await devices()).not.toContain("old-2");
    expect(await h.db.agentConfigDevice.findUnique({ where: { configId_deviceId: { configId, deviceId: "newer" } } })).toMatchObject({ syncedVersion: 1, localPath: "/home/ann/CLAUDE.md" });
    // A dropped device is one that never synced the file: a different copy there is a conflict, never overwritten.
    const old = new Device(ann, "old-0");
    old.files.set("CLAUDE.md", "changed on an old laptop");
    expect(await old.plan()).toMatchObject([{ action: "conflict", reason: "no_sync_base" }]);
  });

  it("validates the manifest", async () => {
    const ann = await h.user("Manifest");
    const entry = { ...file, content_hash: sha("x"), updated_at: "" };
    expect((await ann.post("/v1/configs/sync", { device_id: "d", configs: [entry, entry] })).status).toBe(400);
    expect((await ann.post("/v1/configs/sync", { device_id: "d", configs: [{ ...entry, content_hash: "zz" }] })).status).toBe(400);
    expect((await ann.post("/v1/configs/sync", { configs: [] })).status).toBe(400);
    expect((await ann.post("/v1/configs/sync", { device_id: "d", configs: [] })).body.data).toEqual({ actions: [] });
  });
});

describe("POST /v1/configs/merge", () => {
  it("keeps every line of both sides, shared lines once", async () => {
    const ann = await h.user("Merge");
    const res = await ann.post("/v1/configs/merge", {
      cloud_content: "# Rules\n- use pnpm\n- tabs\n",
      local_content: "# Rules\n- use pnpm\n- run tests first\n- tabs\n",
      file_path: "CLAUDE.md",
      agent: "claude-code",
    });
    expect(res.body.data.merged_content).toBe("# Rules\n- use pnpm\n- run tests first\n- tabs\n");
  });

  it("appends past the alignment bound in linear time, also after a long run of newlines", async () => {
    const ann = await h.user("Merge big");
    // 200,001 × 30 lines is past the alignment bound; `replace(/\n+$/, "")` took seconds on this cloud side.
    const cloud_content = `${"\n".repeat(200_000)}x`;
    const local_content = Array.from({ length: 30 }, (_, i) => `line ${i}`).join("\n");
    const started = Date.now();
    const res = await ann.post("/v1/configs/merge", { cloud_content, local_content });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(res.status).toBe(200);
    expect(res.body.data.merged_content).toBe(`${cloud_content}\n\n${local_content}\n`);
  }, 120_000);
});
