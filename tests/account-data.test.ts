import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { eraseAccountData } from "@/lib/users/delete-account-data.ts";
import { ACCOUNT_DELETION_LEASE_MS, resumeAccountDataDeletions } from "@/lib/users/resume-account-data-deletions.ts";
import { clientFor, createHarness, testPostgres, type ApiResponse, type Client, type Harness } from "./support/harness.ts";
import { dispatch } from "./support/router.ts";

// DELETE /v1/account/data (Memax's account.deleteAllData): the account is emptied and kept; team
// hubs keep what the caller pushed there; nobody else's data moves.

let h: Harness;
let ann: Client & { personalHubId: string };
let bob: Client & { personalHubId: string };
let team: string;
let blobDir: string;

/** Every file under the blob directory (the embedded store keeps one file per object). */
function storedFiles(): string[] {
  return readdirSync(blobDir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);
}

async function uploadText(who: Client, text: string) {
  const bytes = Buffer.from(text);
  const intent = (await who.post("/v1/uploads", { filename: "notes.txt", content_type: "text/plain", size_bytes: bytes.length })).body.data;
  const put = await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(bytes) }));
  expect(put.status).toBe(200);
  return { ...intent.file_ref, sha256: createHash("sha256").update(bytes).digest("hex") };
}

beforeAll(async () => {
  blobDir = mkdtempSync(path.join(tmpdir(), "engram-blobs-"));
  setBlobStore(new LocalBlobStore(blobDir));
  h = await createHarness();
  ann = (await h.user("Ann")) as Client & { personalHubId: string };
  bob = (await h.user("Bob")) as Client & { personalHubId: string };
  team = await h.teamHub(bob, [[ann, "contributor"]]);
});
afterAll(async () => {
  setBlobStore(undefined);
  await h?.close();
  rmSync(blobDir, { recursive: true, force: true });
});

describe("DELETE /v1/account/data", () => {
  it("empties the personal hub and everything that is the caller's alone, in one go, and keeps the account", async () => {
    for (const content of ["# Ann's diary\n\nPrivate.", "# Ann's recipes\n\nPasta."]) expect((await ann.post("/v1/memories", { content })).status).toBe(201);
    expect((await ann.post("/v1/memories", { content: "", file_ref: await uploadText(ann, "Ann's attached notes") })).status).toBe(201);
    const pending = await uploadText(ann, "never attached");
    expect((await ann.post("/v1/topics", { name: "Cooking" })).status).toBe(201);
    expect((await ann.post(`/v1/hubs/${ann.personalHubId}/board/decision-gate`, { question: "Tea or coffee?", options: ["tea", "coffee"] })).status).toBe(201);
    expect((await ann.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "CLAUDE.md", content: "# Rules\n" })).status).toBe(201);
    const board = await ann.post(`/v1/hubs/${ann.personalHubId}/boards`, { title: "My diet", instruction: "Summarise what I eat" });
    expect(board.status, JSON.stringify(board.body)).toBe(201);
    expect((await ann.put("/v1/agent-sessions", { agent: "claude-code", session_id: "s-1", content: '{"role":"user"}\n' })).status).toBe(201);
    expect((await ann.post("/v1/chat/sessions", { scope_type: "user_all_hubs", title: "Ann's chat" })).status).toBe(201);
    expect((await bob.post("/v1/chat/sessions", { scope_type: "user_all_hubs", title: "Bob's chat" })).status).toBe(201);
    const teamNote = await ann.post("/v1/memories", { content: "Ann's note for the team." }, { headers: { "x-hub-id": team } });
    expect(teamNote.status).toBe(201);
    expect((await bob.post("/v1/memories", { content: "Bob's own note." })).status).toBe(201);
    expect((await bob.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "CLAUDE.md", content: "# Bob\n" })).status).toBe(201);
    expect(storedFiles().length).toBeGreaterThanOrEqual(2);

    const res = await ann.delete("/v1/account/data");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toEqual({ deleted: true, memories: 3, topics: 1, configs: 1, sessions: 1 });

    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    expect(await h.db.topic.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    expect(await h.db.decisionGate.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    // A custom board's answers are written from the memories: they go with them.
    expect(await h.db.customBoard.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    expect(await h.db.notification.count({ where: { userId: ann.id } })).toBe(0);
    expect(await h.db.agentConfig.count({ where: { ownerId: ann.id } })).toBe(0);
    expect(await h.db.agentSession.count({ where: { ownerId: ann.id } })).toBe(0);
    expect(await h.db.chatSession.count({ where: { ownerId: ann.id } })).toBe(0);
    expect(await h.db.chatSession.count({ where: { ownerId: bob.id } })).toBe(1);
    expect(await h.db.upload.count({ where: { ownerId: ann.id } })).toBe(0);
    // The attached file's bytes and the never-attached upload's are gone from the store.
    expect(storedFiles().filter((name) => !name.startsWith("."))).toHaveLength(0);
    // A push naming the deleted upload is refused, not attached to nothing.
    expect((await ann.post("/v1/memories", { content: "", file_ref: pending })).status).toBe(400);

    // The account works, and the team keeps what Ann pushed there.
    expect((await ann.get("/v1/auth/me")).status).toBe(200);
    expect((await ann.get(`/v1/memories/${teamNote.body.data.id}`)).status).toBe(200);
    expect((await ann.post("/v1/memories", { content: "A fresh start." })).status).toBe(201);
    // Bob's data did not move.
    expect(await h.db.memory.count({ where: { hubId: bob.personalHubId } })).toBe(1);
    expect(await h.db.agentConfig.count({ where: { ownerId: bob.id } })).toBe(1);

    // Again: nothing left but the fresh start.
    expect((await ann.delete("/v1/account/data")).body.data).toEqual({ deleted: true, memories: 1, topics: 0, configs: 0, sessions: 0 });
  });

  it("keeps the settings, but no longer names as the default persona one whose file it deleted", async () => {
    const dee = await h.user("Dee");
    const persona = await dee.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "SOUL.md", content: "# Captain\nSpeak like a ship's captain." });
    expect(persona.status).toBe(201);
    expect((await dee.patch("/v1/settings", { theme: "dark", chat_default_persona_id: persona.body.data.id })).status).toBe(200);
    expect((await dee.delete("/v1/account/data")).status).toBe(200);
    // The persona's config is gone for good (a file synced again is a new config, with a new id), so a
    // default still naming it pointed at nothing any list or chat could show.
    expect((await dee.get("/v1/personas")).body.data.personas).toEqual([]);
    expect((await dee.get("/v1/settings")).body.data).toMatchObject({ theme: "dark", chat_default_persona_id: "" });
  });

  // A batch failing midway left the mark for the sweep to finish the deletion, yet the request
  // answered 500, as if nothing would come of it. The failure here is the database's own: a trigger
  // refusing to delete one memory while it is installed.
  it("a batch failing midway answers 202 pending, and the sweep finishes the deletion", async () => {
    const cara = (await h.user("Cara")) as Client & { personalHubId: string };
    const pushed = [];
    for (const content of ["# Cara one\n\nFirst.", "# Cara two\n\nSecond.", "# Cara poison\n\nRefuses to go."]) {
      const res = await cara.post("/v1/memories", { content });
      expect(res.status).toBe(201);
      pushed.push(res.body.data.id as string);
    }
    await h.db.$executeRawUnsafe(`
      CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'poisoned row'; END $$`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER refuse_poison BEFORE DELETE ON memories FOR EACH ROW WHEN (OLD.id = '${pushed[2]}'::uuid) EXECUTE FUNCTION refuse_poison()`);
    let res: ApiResponse;
    try {
      res = await cara.delete("/v1/account/data");
    } finally {
      await h.db.$executeRawUnsafe(`DROP TRIGGER refuse_poison ON memories`);
      await h.db.$executeRawUnsafe(`DROP FUNCTION refuse_poison()`);
    }
    expect(res.status, res.text).toBe(202);
    expect(res.body.data).toEqual({ deleted: false, status: "pending" });
    expect(res.text).not.toMatch(/poison/);
    const user = await h.db.user.findUniqueOrThrow({ where: { id: cara.id } });
    expect(user.dataDeletionRequestedAt).not.toBeNull();
    // Let go: the next sweep takes it up at once and finishes it.
    expect(user.dataDeletionHeartbeatAt).toBeNull();
    expect(await resumeAccountDataDeletions(h.db)).toBeGreaterThanOrEqual(1);
    expect(await h.db.memory.count({ where: { hubId: cara.personalHubId } })).toBe(0);
    expect((await h.db.user.findUniqueOrThrow({ where: { id: cara.id } })).dataDeletionRequestedAt).toBeNull();
  });

  it("needs an unrestricted key: one limited to reading or to some hubs gets 403 and nothing is deleted", async () => {
    expect((await bob.post("/v1/memories", { content: "Bob keeps this." })).status).toBe(201);
    const readOnly = clientFor((await bob.post("/v1/auth/api-keys", { name: "reader", scopes: ["read"] })).body.data.key);
    const hubOnly = clientFor((await bob.post("/v1/auth/api-keys", { name: "team only", hub_id: team })).body.data.key);
    expect((await readOnly.delete("/v1/account/data")).status).toBe(403);
    expect((await hubOnly.delete("/v1/account/data")).status).toBe(403);
    expect(await h.db.memory.count({ where: { hubId: bob.personalHubId } })).toBe(2);
  });

  /** lib/events/emit-event.ts's EVENTS_LOCK: one transaction-scoped advisory lock for every event of the server. */
  const EVENTS_LOCK = 0x656e6772;

  /** A second connection, in a transaction, for holding locks as a stalled writer would. */
  async function side(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: h.url! });
    await client.connect();
    await client.query("BEGIN");
    return client;
  }

  /** Waits until `n` requests wait for a lock that `client` holds, directly or behind a request that waits for it. */
  async function waiters(client: pg.Client, n: number): Promise<void> {
    for (let waited = 0; ; waited += 20) {
      const { rows } = await client.query(`
        WITH direct AS (SELECT l.pid FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid)))
        SELECT (SELECT count(DISTINCT pid) FROM direct)::int
             + (SELECT count(DISTINCT l.pid) FROM pg_locks l WHERE NOT l.granted AND l.pid NOT IN (SELECT pid FROM direct)
                  AND pg_blocking_pids(l.pid) && ARRAY(SELECT pid FROM direct))::int AS n`);
      if (rows[0].n >= n) return;
      if (waited > 20_000) throw new Error(`only ${rows[0].n} of ${n} requests waited`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it.skipIf(!testPostgres())("while it waits for one of the caller's rows, other users' writes (which record events) are not held up", async () => {
    const cyd = await h.user("Cyd");
    const dan = await h.user("Dan");
    expect((await cyd.post("/v1/memories", { content: "Cyd's note." })).status).toBe(201);
    expect((await cyd.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "CLAUDE.md", content: "# Cyd\n" })).status).toBe(201);
    const config = await h.db.agentConfig.findFirstOrThrow({ where: { ownerId: cyd.id } });
    const client = await side();
    let deletion: Promise<ApiResponse> | undefined;
    let eventsFree: boolean;
    try {
      // A config sync of Cyd's stalled half-way: the deletion waits for its row.
      await client.query("SELECT 1 FROM agent_configs WHERE id = $1 FOR UPDATE", [config.id]);
      deletion = cyd.delete("/v1/account/data");
      await waiters(client, 1);
      // Every write that records an event (Dan's push here) needs this lock; the deletion held it from
      // its personal-hub part to its commit.
      eventsFree = (await client.query("SELECT pg_try_advisory_xact_lock($1::bigint) AS ok", [EVENTS_LOCK])).rows[0].ok;
    } finally {
      await client.query("ROLLBACK").catch(() => {});
      await client.end();
    }
    expect(eventsFree).toBe(true);
    expect((await deletion).status).toBe(200);
    expect((await dan.post("/v1/memories", { content: "Dan's note." })).status).toBe(201);
    expect(await h.db.agentConfig.count({ where: { ownerId: cyd.id } })).toBe(0);
  });

  it.skipIf(!testPostgres())("an upload that a push into a team hub is attaching meanwhile keeps its bytes", async () => {
    const eve = await h.user("Eve");
    const hub = await h.teamHub(bob, [[eve, "contributor"]]);
    const ref = await uploadText(eve, "Eve's file for the team");
    const client = await side();
    let push: Promise<ApiResponse> | undefined;
    let deletion: Promise<ApiResponse> | undefined;
    try {
      // The push stalls at its last step (recording its event), its upload attached but not committed.
      await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [EVENTS_LOCK]);
      push = eve.post("/v1/memories", { content: "", file_ref: ref }, { headers: { "x-hub-id": hub } });
      await waiters(client, 1);
      // Meanwhile Eve empties her account; it reaches the upload, which still reads as unattached.
      deletion = eve.delete("/v1/account/data");
      await waiters(client, 2);
    } finally {
      await client.query("ROLLBACK").catch(() => {});
      await client.end();
    }
    const pushed = await push;
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    expect((await deletion)!.status).toBe(200);
    // The team's memory keeps its file: the deletion took only what was unattached when it deleted.
    const memory = await eve.get(`/v1/memories/${pushed.body.data.id}`);
    expect(memory.body.data.attachments).toHaveLength(1);
    const download = await eve.get(`/v1/memories/${pushed.body.data.id}/attachments/${memory.body.data.attachments[0].id}/download`);
    expect(download.status).toBe(200);
    expect(download.text).toBe("Eve's file for the team");
  });

  it.skipIf(!testPostgres())("a default persona being set while the deletion removes its config does not outlive it", async () => {
    const ivy = await h.user("Ivy");
    const persona = await ivy.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "SOUL.md", content: "# Captain\nSpeak like a ship's captain." });
    expect(persona.status).toBe(201);
    expect((await ivy.patch("/v1/settings", { theme: "dark" })).status).toBe(200);
    const client = await side();
    let patch: Promise<ApiResponse> | undefined;
    let deletion: Promise<ApiResponse> | undefined;
    try {
      // The settings write stalls on its row, its persona found; no default names the persona yet.
      await client.query("SELECT 1 FROM user_settings WHERE user_id = $1 FOR UPDATE", [ivy.id]);
      patch = ivy.patch("/v1/settings", { chat_default_persona_id: persona.body.data.id });
      await waiters(client, 1);
      // Meanwhile the account is emptied, the persona's config with it: done, or waiting for the write.
      deletion = ivy.delete("/v1/account/data");
      await Promise.race([deletion, waiters(client, 2)]);
    } finally {
      await client.query("ROLLBACK").catch(() => {});
      await client.end();
    }
    expect((await deletion!).status).toBe(200);
    expect([200, 404]).toContain((await patch!).status);
    expect(await h.db.agentConfig.count({ where: { ownerId: ivy.id } })).toBe(0);
    expect((await ivy.get("/v1/settings")).body.data).toMatchObject({ theme: "dark", chat_default_persona_id: "" });
  });

  /** The session files of `who` left in the blob directory (each object is one file and its .meta.json sidecar). */
  function sessionFilesOf(who: Client): string[] {
    const dir = path.join(blobDir, "agent-sessions", who.id);
    return existsSync(dir) ? readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile() && !e.name.endsWith(".meta.json")).map((e) => e.name) : [];
  }

  it.skipIf(!testPostgres())("a session file written while the deletion runs is deleted with it, not left in the store without a row", async () => {
    const fay = await h.user("Fay");
    const first = await fay.put("/v1/agent-sessions", { agent: "codex", session_id: "racing", content: "one\n" });
    expect(first.status).toBe(201);
    const client = await side();
    let put: Promise<ApiResponse> | undefined;
    let deletion: Promise<ApiResponse> | undefined;
    try {
      // The new version's bytes are stored and its write stalls on the row, before it commits.
      await client.query("SELECT 1 FROM agent_sessions WHERE id = $1 FOR UPDATE", [first.body.data.id]);
      put = fay.put("/v1/agent-sessions", { agent: "codex", session_id: "racing", content: "one\ntwo\n" });
      await waiters(client, 1);
      deletion = fay.delete("/v1/account/data");
      await waiters(client, 2);
    } finally {
      await client.query("ROLLBACK").catch(() => {});
      await client.end();
    }
    expect((await put).status).toBe(200);
    const deleted = await deletion!;
    expect(deleted.status).toBe(200);
    expect(await h.db.agentSession.count({ where: { ownerId: fay.id } })).toBe(0);
    expect(sessionFilesOf(fay)).toEqual([]);
  });

  it.skipIf(!testPostgres())("a session file written as the deletion commits is stored whole after it, not refused as deleted mid-request", async () => {
    const gus = await h.user("Gus");
    expect((await gus.post("/v1/memories", { content: "Gus's note." })).status).toBe(201);
    const first = await gus.put("/v1/agent-sessions", { agent: "codex", session_id: "racing", content: "one\n" });
    expect(first.status).toBe(201);
    const client = await side();
    let put: Promise<ApiResponse> | undefined;
    let deletion: Promise<ApiResponse> | undefined;
    try {
      // The deletion stalls at its last step (recording its events), the session's row deleted but not committed.
      await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [EVENTS_LOCK]);
      deletion = gus.delete("/v1/account/data");
      await waiters(client, 1);
      put = gus.put("/v1/agent-sessions", { agent: "codex", session_id: "racing", content: "one\ntwo\n" });
      await waiters(client, 2);
    } finally {
      await client.query("ROLLBACK").catch(() => {});
      await client.end();
    }
    expect((await deletion!).body.data).toMatchObject({ deleted: true, sessions: 1 });
    const written = await put!;
    expect(written.status, JSON.stringify(written.body)).toBe(201);
    const listed = await gus.get("/v1/agent-sessions?session_id=racing");
    expect(listed.body.data.sessions.map((s: { content: string }) => s.content)).toEqual(["one\ntwo\n"]);
    expect(sessionFilesOf(gus)).toHaveLength(1);
  });
});

describe("a sweep that read a deletion's mark before its request finished", () => {
  // Another instance's start-up sweep (or this one's 10-minute tick) reads the mark while the request
  // runs; by the time it gets to the account, the request has finished and the caller writes again.
  it("deletes nothing written after the request cleared the mark, in its batches or its last transaction", async () => {
    const hal = (await h.user("Hal")) as Client & { personalHubId: string };
    expect((await hal.post("/v1/memories", { content: "Hal's old note." })).status).toBe(201);
    const requestedAt = new Date();
    await h.db.user.update({ where: { id: hal.id }, data: { dataDeletionRequestedAt: requestedAt } });
    // The request's run: it finishes and clears the mark.
    expect(await eraseAccountData(h.db, hal.id, requestedAt)).toMatchObject({ deleted: true, memories: 1 });
    expect((await h.db.user.findUniqueOrThrow({ where: { id: hal.id } })).dataDeletionRequestedAt).toBeNull();

    expect((await hal.post("/v1/memories", { content: "Hal's fresh start." })).status).toBe(201);
    expect((await hal.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "CLAUDE.md", content: "# Hal\n" })).status).toBe(201);
    expect((await hal.post("/v1/chat/sessions", { scope_type: "user_all_hubs", title: "Hal's chat" })).status).toBe(201);

    // The sweep's run of the same mark, afterwards.
    await eraseAccountData(h.db, hal.id, requestedAt);
    expect(await h.db.memory.count({ where: { hubId: hal.personalHubId } })).toBe(1);
    expect(await h.db.agentConfig.count({ where: { ownerId: hal.id } })).toBe(1);
    expect(await h.db.chatSession.count({ where: { ownerId: hal.id } })).toBe(1);
  });
});

describe("an account-data deletion whose file deletes are slow", () => {
  // The lease was renewed only before each batch; a batch's files then went from the blob store with
  // none, so a store taking longer than the lease (S3, Vercel Blob) made the live request look stopped:
  // a sweep took the deletion up under it, counted it and, the fourth time, gave it up (409).
  it("keeps its lease fresh while the files go, so a sweep leaves it to the request", async () => {
    const ivy = (await h.user("Ivy")) as Client & { personalHubId: string };
    expect((await ivy.post("/v1/memories", { content: "", file_ref: await uploadText(ivy, "Ivy's notes") })).status).toBe(201);
    const seen: { swept?: number; attempts?: number } = {};
    const base = new LocalBlobStore(blobDir);
    const slow = Object.assign(Object.create(base) as LocalBlobStore, {
      async delete(key: string) {
        if (seen.swept === undefined) {
          // The delete takes longer than the lease: the clock moves on past it, and the sweep comes.
          await h.db.user.update({ where: { id: ivy.id }, data: { dataDeletionHeartbeatAt: new Date(Date.now() - 2 * ACCOUNT_DELETION_LEASE_MS) } });
          vi.advanceTimersByTime(ACCOUNT_DELETION_LEASE_MS);
          for (let i = 0; i < 100; i++) {
            const { dataDeletionHeartbeatAt } = await h.db.user.findUniqueOrThrow({ where: { id: ivy.id } });
            if (dataDeletionHeartbeatAt && dataDeletionHeartbeatAt.getTime() > Date.now() - ACCOUNT_DELETION_LEASE_MS) break;
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          seen.swept = await resumeAccountDataDeletions(h.db);
          seen.attempts = (await h.db.user.findUniqueOrThrow({ where: { id: ivy.id } })).dataDeletionAttempts;
        }
        await base.delete(key);
      },
    });
    setBlobStore(slow);
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      expect((await ivy.delete("/v1/account/data")).body.data).toMatchObject({ deleted: true, memories: 1 });
    } finally {
      vi.useRealTimers();
      setBlobStore(new LocalBlobStore(blobDir));
    }
    expect(seen).toEqual({ swept: 0, attempts: 0 });
  });
});
