import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deletePersona } from "@/lib/personas/delete-persona.ts";
import { restorePersonaRevision } from "@/lib/personas/restore-persona-revision.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { loadMemaxSdk, routeFetch } from "./support/memax-sdk.ts";

// Personas (Memax's personas resource): read from synced identity configs, their history is the
// file's, a restore writes a new version, a delete hides the persona until the file changes.

let h: Harness;
let ann: Client;
let eve: Client;
let sdk: any;

const put = async (who: Client, agent: string, file_path: string, content: string, scope = "global") => {
  const res = await who.put("/v1/configs", { agent, scope, file_path, content });
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  return res.body.data as { id: string; version: number };
};

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  eve = await h.user("Eve");
  const { Memax } = await loadMemaxSdk();
  sdk = new Memax({ apiUrl: "http://engram.test", apiKey: ann.key, fetch: routeFetch, maxRetries: 0 });
});
afterAll(async () => {
  await h?.close();
});

describe("personas", () => {
  it("are the identity files among the synced configs, named by their first heading", async () => {
    const soul = await put(ann, "openclaw", "SOUL.md", "# Juniper\n\nCalm, precise, a little dry.\n");
    await put(ann, "claude-code", ".claude/personas/reviewer.md", "Strict about tests.\n");
    await put(ann, "claude-code", "CLAUDE.md", "# Rules\n");
    await put(ann, "claude-code", ".claude/personas/notes.txt", "not markdown");
    await put(eve, "openclaw", "SOUL.md", "# Eve's soul\n");
    const { personas } = await sdk.personas.list();
    expect(personas.map((p: { name: string }) => p.name).sort()).toEqual(["Juniper", "reviewer"]);
    expect(personas.find((p: { id: string }) => p.id === soul.id)).toMatchObject({
      owner_id: ann.id,
      source_agent: "openclaw",
      source_scope: "global",
      source_file_path: "SOUL.md",
      content: "# Juniper\n\nCalm, precise, a little dry.\n",
      content_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      version: 1,
    });
  });

  it("keep the file's history; a restore writes an old version back as a new one, synced like any change", async () => {
    const soul = await put(ann, "openclaw", "SOUL.md", "# Juniper\n\nWarm and chatty now.\n");
    expect(soul.version).toBe(2);
    const { revisions } = await sdk.personas.listRevisions(soul.id);
    expect(revisions.map((r: { version: number }) => r.version)).toEqual([2, 1]);
    expect(revisions[0]).not.toHaveProperty("content");
    expect(await sdk.personas.getRevision(soul.id, 1)).toMatchObject({ persona_id: soul.id, version: 1, content: "# Juniper\n\nCalm, precise, a little dry.\n" });
    expect(await sdk.personas.restoreRevision(soul.id, 1)).toEqual({ persona_id: soul.id, restored_version: 1, head_version: 3 });
    const config = (await ann.get(`/v1/configs/${soul.id}`)).body.data;
    expect(config).toMatchObject({ version: 3, content: "# Juniper\n\nCalm, precise, a little dry.\n" });
    // The same content again is no new version.
    expect(await sdk.personas.restoreRevision(soul.id, 3)).toEqual({ persona_id: soul.id, restored_version: 3, head_version: 3 });
    await expect(sdk.personas.getRevision(soul.id, 99)).rejects.toMatchObject({ status: 404 });
  });

  it("a delete hides the persona, not the file; a change to the file brings it back", async () => {
    const { personas } = await sdk.personas.list();
    const reviewer = personas.find((p: { name: string }) => p.name === "reviewer");
    expect(await sdk.personas.delete(reviewer.id)).toEqual({ deleted: true });
    expect((await sdk.personas.list()).personas.map((p: { name: string }) => p.name)).toEqual(["Juniper"]);
    expect((await ann.get(`/v1/configs/${reviewer.id}`)).body.data.content).toBe("Strict about tests.\n");
    await expect(sdk.personas.listRevisions(reviewer.id)).rejects.toMatchObject({ status: 404 });
    await put(ann, "claude-code", ".claude/personas/reviewer.md", "# Reviewer\n\nStrict about tests and names.\n");
    expect((await sdk.personas.list()).personas.map((p: { name: string }) => p.name).sort()).toEqual(["Juniper", "Reviewer"]);
  });

  it("are the owner's alone, and a deleted config is no persona", async () => {
    const { personas } = await sdk.personas.list();
    const juniper = personas.find((p: { name: string }) => p.name === "Juniper");
    expect((await eve.get(`/v1/personas/${juniper.id}/revisions`)).status).toBe(404);
    expect((await eve.delete(`/v1/personas/${juniper.id}`)).status).toBe(404);
    expect((await eve.post(`/v1/personas/${juniper.id}/revisions/1/restore`, {})).status).toBe(404);
    expect((await ann.get("/v1/personas/not-an-id/revisions")).status).toBe(404);
    expect((await ann.get(`/v1/personas/${juniper.id}/revisions/one`)).status).toBe(404);
    expect((await ann.delete(`/v1/configs/${juniper.id}`)).status).toBe(200);
    expect((await sdk.personas.list()).personas.map((p: { name: string }) => p.name)).toEqual(["Reviewer"]);
  });
});

describe("a persona's delete and restore, racing", () => {
  const names = async (who: Client) => ((await who.get("/v1/personas")).body.data.personas as { name: string }[]).map((p) => p.name).sort();

  it("a restore checked before a delete committed does not write the hidden persona back into the list", async () => {
    const ray = await h.user("Ray");
    const soul = await put(ray, "openclaw", "SOUL.md", "# Ray one\n");
    await put(ray, "openclaw", "SOUL.md", "# Ray two\n");
    const hide = () => ray.delete(`/v1/personas/${soul.id}`);
    const ctx = sessionContext(h, ray, changedBefore(h.db, ["$transaction"], hide));
    await expect(restorePersonaRevision(ctx, soul.id, "1")).rejects.toMatchObject({ code: "not_found" });
    expect(await names(ray)).toEqual([]);
    expect((await ray.get(`/v1/configs/${soul.id}`)).body.data).toMatchObject({ version: 2, content: "# Ray two\n" });
  });

  it("a delete checked before a restore committed hides the restored version, as it answers", async () => {
    const rae = await h.user("Rae");
    const soul = await put(rae, "openclaw", "SOUL.md", "# Rae one\n");
    await put(rae, "openclaw", "SOUL.md", "# Rae two\n");
    const restore = () => rae.post(`/v1/personas/${soul.id}/revisions/1/restore`);
    const ctx = sessionContext(h, rae, changedBefore(h.db, ["$transaction", "agentConfig.updateMany"], restore));
    expect(await deletePersona(ctx, soul.id)).toEqual({ deleted: true });
    expect((await rae.get(`/v1/configs/${soul.id}`)).body.data).toMatchObject({ version: 3, content: "# Rae one\n" });
    expect(await names(rae)).toEqual([]);
  });
});

describe("a persona's delete or restore and an account-data deletion, racing", () => {
  it("a delete whose persona the account-data deletion removed meanwhile is 404, not 500", async () => {
    const zed = await h.user("Zed");
    const soul = await put(zed, "openclaw", "SOUL.md", "# Zed\n");
    const wipe = async () => expect((await zed.delete("/v1/account/data")).status).toBe(200);
    const ctx = sessionContext(h, zed, changedBefore(h.db, ["$transaction"], wipe));
    await expect(deletePersona(ctx, soul.id)).rejects.toMatchObject({ code: "not_found" });
  });

  it("a restore whose persona the account-data deletion removed meanwhile is 404, not 500", async () => {
    const zoe = await h.user("Zoe");
    const soul = await put(zoe, "openclaw", "SOUL.md", "# Zoe one\n");
    await put(zoe, "openclaw", "SOUL.md", "# Zoe two\n");
    const wipe = async () => expect((await zoe.delete("/v1/account/data")).status).toBe(200);
    const ctx = sessionContext(h, zoe, changedBefore(h.db, ["$transaction"], wipe));
    await expect(restorePersonaRevision(ctx, soul.id, "1")).rejects.toMatchObject({ code: "not_found" });
  });
});

describe("persona names", () => {
  it("read a heading followed by a long run of spaces in linear time, not the old regex's cubic backtracking", async () => {
    const kim = await h.user("Kim");
    // With `^#{1,3}\s+(.+?)\s*#*\s*$` this line took about half a minute (and 512 KiB of it, hours).
    await put(kim, "openclaw", "SOUL.md", `# Juniper${" ".repeat(5000)}x\n\nbody\n`);
    await put(kim, "claude-code", ".claude/personas/closing.md", "\n#### not this one\n## Closing ##  \n");
    const started = Date.now();
    const res = await kim.get("/v1/personas");
    expect(Date.now() - started).toBeLessThan(5000);
    expect(res.status).toBe(200);
    const names = res.body.data.personas.map((p: { name: string }) => p.name.trimEnd());
    expect(names.sort()).toEqual(["Closing", "Juniper"]);
  }, 120_000);

  it("keep a # that ends the heading's last word, as a memory's title does", async () => {
    const lee = await h.user("Lee");
    // Any trailing `#` was taken for a closing sequence: this persona was named "Tutor for C".
    await put(lee, "claude-code", ".claude/personas/tutor.md", "## Tutor for C#\n\nExplains generics.\n");
    await put(lee, "openclaw", "SOUL.md", "   # Juniper ##\n");
    const names = (await lee.get("/v1/personas")).body.data.personas.map((p: { name: string }) => p.name);
    expect(names.sort()).toEqual(["Juniper", "Tutor for C#"]);
  });
});

describe("the persona list's size", () => {
  it("pages by content: a page holds at most 8 MiB, the cursor walks every persona once, and is bound to its list and user", async () => {
    const max = await h.user("Max");
    const big = (i: number) => `# Persona ${i}\n\n${"Calm and precise. ".repeat(28_000)}`.slice(0, 500 * 1024);
    // 20 personas of 500 KiB: about 10 MiB, which one response carried whole.
    for (let i = 0; i < 20; i++) await put(max, "claude-code", `.claude/personas/p${String(i).padStart(2, "0")}.md`, big(i));
    const first = await max.get("/v1/personas");
    expect(first.status, first.text).toBe(200);
    const page1 = first.body.data;
    expect(page1.has_more).toBe(true);
    expect(page1.personas.length).toBeLessThan(20);
    expect(page1.personas.reduce((sum: number, p: { content: string }) => sum + Buffer.byteLength(p.content), 0)).toBeLessThanOrEqual(8 * 1024 * 1024);
    const names: string[] = page1.personas.map((p: { name: string }) => p.name);
    let cursor: string = page1.next_cursor;
    for (let guard = 0; cursor && guard < 10; guard++) {
      const next = await max.get(`/v1/personas?cursor=${encodeURIComponent(cursor)}`);
      expect(next.status, next.text).toBe(200);
      names.push(...next.body.data.personas.map((p: { name: string }) => p.name));
      cursor = next.body.data.next_cursor;
    }
    // Newest change first, each once.
    expect(names).toEqual(Array.from({ length: 20 }, (_, i) => `Persona ${19 - i}`));
    expect((await max.get("/v1/personas?limit=2")).body.data.personas.map((p: { name: string }) => p.name)).toEqual(["Persona 19", "Persona 18"]);
    expect((await max.get("/v1/personas?limit=none")).body.error.code).toBe("invalid_limit");
    // Another user's, or another list's, cursor is no cursor of this list.
    expect((await eve.get(`/v1/personas?cursor=${encodeURIComponent(page1.next_cursor)}`)).body.error.code).toBe("invalid_cursor");
    const configsCursor = (await max.get("/v1/configs?limit=1")).body.data.next_cursor as string;
    expect(configsCursor).not.toBe("");
    expect((await max.get(`/v1/personas?cursor=${encodeURIComponent(configsCursor)}`)).body.error.code).toBe("invalid_cursor");
  }, 120_000);

  it("lists every persona of a typical account without a cursor, as Memax's personas.list() asks (no limit)", async () => {
    const una = await h.user("Una");
    for (let i = 0; i < 120; i++) await put(una, "claude-code", `.claude/personas/s${String(i).padStart(3, "0")}.md`, `# Small ${i}\n\nShort and kind.\n`);
    const all = await una.get("/v1/personas");
    expect(all.status, all.text).toBe(200);
    expect(all.body.data.personas).toHaveLength(120);
    expect(all.body.data).toMatchObject({ has_more: false, next_cursor: "" });
  }, 120_000);
});

describe("a persona's revision list", () => {
  /** Blocks of `table`'s out-of-line (TOAST) storage read so far: large content is stored there, so reading it shows here. */
  async function toastBlocks(table: string): Promise<number> {
    await h.database.sql.exec("SELECT pg_stat_force_next_flush()");
    const [row] = await h.database.sql.query<{ blocks: number }>(
      "SELECT (coalesce(toast_blks_read, 0) + coalesce(toast_blks_hit, 0))::int AS blocks FROM pg_statio_user_tables WHERE relname = $1",
      [table],
    );
    return row!.blocks;
  }

  it("reads no content, neither the revisions' nor the file's: it shows none (up to 50 × 512 KiB read per request before)", async () => {
    const rae = await h.user("Rae");
    // Random text does not compress: each version is stored out of line (TOAST), so reading one shows in the TOAST block counts.
    const big = () => `# Rae\n\n${randomBytes(150 * 1024).toString("base64")}`;
    let id = "";
    for (let i = 0; i < 3; i++) id = (await put(rae, "openclaw", "SOUL.md", big())).id;
    const before = [await toastBlocks("agent_config_versions"), await toastBlocks("agent_configs")];
    const res = await rae.get(`/v1/personas/${id}/revisions`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.revisions.map((r: { version: number }) => r.version)).toEqual([3, 2, 1]);
    expect(res.body.data.revisions[0]).not.toHaveProperty("content");
    expect([await toastBlocks("agent_config_versions"), await toastBlocks("agent_configs")]).toEqual(before);
  });

  it("a delete reads none of the file's content either: it hides the persona by its version", async () => {
    const ray = await h.user("Ray");
    const { id } = await put(ray, "openclaw", "SOUL.md", `# Ray\n\n${randomBytes(150 * 1024).toString("base64")}`);
    const before = await toastBlocks("agent_configs");
    expect((await ray.delete(`/v1/personas/${id}`)).status).toBe(200);
    expect(await toastBlocks("agent_configs")).toBe(before);
    expect((await ray.get("/v1/personas")).body.data.personas).toEqual([]);
  });

  it("a restore reads none of the file's content: it compares and writes by the content hash", async () => {
    const roe = await h.user("Roe");
    const big = () => `# Roe\n\n${randomBytes(150 * 1024).toString("base64")}`;
    let id = "";
    for (let i = 0; i < 2; i++) id = (await put(roe, "openclaw", "SOUL.md", big())).id;
    // The head's own revision: nothing to write, so nothing of the file's content needs reading.
    const before = await toastBlocks("agent_configs");
    const same = await roe.post(`/v1/personas/${id}/revisions/2/restore`);
    expect(same.body.data, same.text).toEqual({ persona_id: id, restored_version: 2, head_version: 2 });
    expect(await toastBlocks("agent_configs")).toBe(before);
    const back = await roe.post(`/v1/personas/${id}/revisions/1/restore`);
    expect(back.body.data, back.text).toEqual({ persona_id: id, restored_version: 1, head_version: 3 });
    const first = (await roe.get(`/v1/personas/${id}/revisions/1`)).body.data.content as string;
    expect(first).toMatch(/^# Roe\n\n/);
    expect((await roe.get("/v1/personas")).body.data.personas).toMatchObject([{ id, content: first, version: 3 }]);
    expect((await roe.get(`/v1/personas/${id}/revisions/3`)).body.data.content).toBe(first);
  });

  it("pages as every list does (limit, cursor, next_cursor, has_more); one default page holds every kept revision", async () => {
    const sal = await h.user("Sal");
    let id = "";
    for (let i = 1; i <= 5; i++) id = (await put(sal, "openclaw", "SOUL.md", `# Sal ${i}\n`)).id;
    const all = await sal.get(`/v1/personas/${id}/revisions`);
    expect(all.body.data).toMatchObject({ next_cursor: "", has_more: false });
    expect(all.body.data.revisions.map((r: { version: number }) => r.version)).toEqual([5, 4, 3, 2, 1]);
    const first = await sal.get(`/v1/personas/${id}/revisions?limit=2`);
    expect(first.status, first.text).toBe(200);
    expect(first.body.data.revisions.map((r: { version: number }) => r.version)).toEqual([5, 4]);
    expect(first.body.data.has_more).toBe(true);
    const versions: number[] = [];
    let cursor = first.body.data.next_cursor as string;
    for (let guard = 0; cursor && guard < 5; guard++) {
      const next = await sal.get(`/v1/personas/${id}/revisions?limit=2&cursor=${encodeURIComponent(cursor)}`);
      expect(next.status, next.text).toBe(200);
      versions.push(...next.body.data.revisions.map((r: { version: number }) => r.version));
      cursor = next.body.data.next_cursor;
    }
    expect(versions).toEqual([3, 2, 1]);
    expect((await sal.get(`/v1/personas/${id}/revisions?limit=0`)).body.error.code).toBe("invalid_limit");
    // A cursor of another persona's list, or of the config's own versions list, is no cursor of this one.
    const other = (await put(sal, "openclaw", "agents/b/SOUL.md", "# B\n")).id;
    expect((await sal.get(`/v1/personas/${other}/revisions?cursor=${encodeURIComponent(first.body.data.next_cursor)}`)).body.error.code).toBe("invalid_cursor");
    const versionsCursor = (await sal.get(`/v1/configs/${id}/versions?limit=2`)).body.data.next_cursor as string;
    expect((await sal.get(`/v1/personas/${id}/revisions?cursor=${encodeURIComponent(versionsCursor)}`)).body.error.code).toBe("invalid_cursor");
  });
});
