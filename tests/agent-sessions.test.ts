import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readAll, setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { newId } from "@/lib/ids.ts";
import { MAX_CURSOR_LENGTH } from "@/lib/api/pagination.ts";
import { MAX_SESSION_BYTES, MAX_SESSION_BYTES_PER_USER, MAX_SESSION_CONTENT_BYTES_PER_PAGE, MAX_SESSIONS_PER_USER, MAX_SESSIONS_WITH_CONTENT } from "@/lib/agent-sessions/agent-session-fields.ts";
import { putAgentSession } from "@/lib/agent-sessions/put-agent-session.ts";
import { sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, testPostgres, type Harness } from "./support/harness.ts";

let h: Harness;
let blobs: LocalBlobStore;
let blobDir: string;
beforeAll(async () => {
  blobDir = mkdtempSync(path.join(tmpdir(), "engram-sessions-"));
  blobs = new LocalBlobStore(blobDir);
  setBlobStore(blobs);
  h = await createHarness();
});
afterAll(async () => {
  setBlobStore(undefined);
  await h?.close();
  rmSync(blobDir, { recursive: true, force: true });
});

describe("/v1/agent-sessions", () => {
  it("stores, replaces, lists and reads back a session file, per owner", async () => {
    const ann = await h.user("Ann");
    const first = await ann.put("/v1/agent-sessions", { agent: "claude-code", session_id: "s-1", content: '{"role":"user"}\n', title: "Fix the build" });
    expect(first.status, first.text).toBe(201);
    expect(first.body.data).toMatchObject({ agent: "claude-code", session_id: "s-1", title: "Fix the build", size_bytes: 16, content_type: "application/x-ndjson" });
    expect(first.body.data.content).toBeUndefined();
    const again = await ann.put("/v1/agent-sessions", { agent: "claude-code", session_id: "s-1", content: '{"role":"user"}\n{"role":"assistant"}\n' });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ id: first.body.data.id, title: "Fix the build", size_bytes: 37 });
    await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "s-2", content: "x" });
    const all = await ann.get("/v1/agent-sessions");
    expect(all.body.data.sessions.map((s: { session_id: string }) => s.session_id)).toEqual(["s-2", "s-1"]);
    expect(all.body.data.sessions[0].content).toBeUndefined();
    const one = await ann.get("/v1/agent-sessions?agent=claude-code&session_id=s-1");
    expect(one.body.data.sessions).toHaveLength(1);
    expect(one.body.data.sessions[0].content).toBe('{"role":"user"}\n{"role":"assistant"}\n');
    const paged = await ann.get("/v1/agent-sessions?limit=1");
    expect(paged.body.data.has_more).toBe(true);
    const next = await ann.get(`/v1/agent-sessions?limit=1&cursor=${encodeURIComponent(paged.body.data.next_cursor)}`);
    expect(next.body.data.sessions.map((s: { session_id: string }) => s.session_id)).toEqual(["s-1"]);
    const bob = await h.user("Bob");
    expect((await bob.get("/v1/agent-sessions?session_id=s-1")).body.data.sessions).toEqual([]);
  });

  it("reads a session by the id PUT stored, padded or not (PUT trims session_id, so GET does too)", async () => {
    const ann = await h.user("Ann");
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", session_id: " pad-1 ", content: "transcript\n" })).body.data.session_id).toBe("pad-1");
    const padded = await ann.get(`/v1/agent-sessions?agent=codex&session_id=${encodeURIComponent(" pad-1 ")}`);
    expect(padded.status).toBe(200);
    expect(padded.body.data.sessions.map((s: { session_id: string; content: string }) => [s.session_id, s.content])).toEqual([["pad-1", "transcript\n"]]);
  });

  it("bounds the cursor parameter as other lists do (400 past it), while the longest cursor it issues still reads on", async () => {
    const ann = await h.user("Cursors");
    // The cursor signs its list, session_id included: 200 control characters are 1,200 bytes of its JSON.
    const sessionId = "\u0001".repeat(200);
    for (const agent of ["a".repeat(64), "b".repeat(64)]) expect((await ann.put("/v1/agent-sessions", { agent, session_id: sessionId, content: "x\n" })).status).toBe(201);
    const first = await ann.get(`/v1/agent-sessions?limit=1&session_id=${encodeURIComponent(sessionId)}`);
    expect(first.body.data.has_more).toBe(true);
    const next = await ann.get(`/v1/agent-sessions?limit=1&session_id=${encodeURIComponent(sessionId)}&cursor=${encodeURIComponent(first.body.data.next_cursor)}`);
    expect(next.status, next.text).toBe(200);
    expect(next.body.data.sessions).toHaveLength(1);

    const long = await ann.get(`/v1/agent-sessions?cursor=${"a".repeat(MAX_CURSOR_LENGTH + 1)}`);
    expect(long.status).toBe(400);
    expect(long.body.error.code).toBe("invalid_request");
    expect(long.body.error.details.issues.map((i: { path: string }) => i.path)).toEqual(["cursor"]);
  });

  it("bounds what one user keeps (1,000 files, 1 GiB) and how many files a page returns with their content (5)", async () => {
    const ann = await h.user("Ann");
    const rows = (n: number, size: number, prefix: string) =>
      Array.from({ length: n }, (_, i) => ({ id: newId(), ownerId: ann.id, agent: "codex", sessionId: `${prefix}-${i}`, contentType: "application/x-ndjson", contentHash: "0", sizeBytes: size, storeKey: `agent-sessions/${ann.id}/none/${i}` }));
    await h.db.agentSession.createMany({ data: rows(MAX_SESSIONS_PER_USER - 1, 1, "old") });
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "last", content: "x" })).status).toBe(201);
    const over = await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "one-too-many", content: "x" });
    expect(over.status).toBe(409);
    expect(over.body.error.details.limit).toBe(MAX_SESSIONS_PER_USER);
    // There is no endpoint to delete one session: the message names what the caller can do, replace one.
    expect(over.body.error.message).not.toMatch(/delete some/i);
    expect(over.body.error.message).toMatch(/replace one you keep: PUT it again with the same agent and session_id/);
    // Replacing one that exists is still fine.
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "last", content: "y" })).status).toBe(200);

    const bea = await h.user("Bea");
    await h.db.agentSession.create({ data: { id: newId(), ownerId: bea.id, agent: "codex", sessionId: "huge", contentType: "x", contentHash: "0", sizeBytes: MAX_SESSION_BYTES_PER_USER - 10, storeKey: "agent-sessions/none" } });
    const full = await bea.put("/v1/agent-sessions", { agent: "codex", session_id: "more", content: "x".repeat(20) });
    expect(full.status).toBe(413);
    expect(full.body.error.message).toMatch(/replace a larger one you keep: PUT it again with the same agent and session_id/);
    expect(await h.db.agentSession.count({ where: { ownerId: bea.id } })).toBe(1);

    for (const agent of ["a1", "a2", "a3", "a4", "a5", "a6", "a7"]) expect((await bea.put("/v1/agent-sessions", { agent, session_id: "shared", content: "" })).status).toBe(201);
    const page = await bea.get("/v1/agent-sessions?session_id=shared&limit=100");
    expect(page.body.data.sessions).toHaveLength(MAX_SESSIONS_WITH_CONTENT);
    expect(page.body.data.has_more).toBe(true);
  });

  it("bounds a page with content by bytes too: sessions up to 5 MiB of content in all (at least one), the rest behind next_cursor", async () => {
    const ann = await h.user("Budget");
    // Three sessions of 2 MiB under one session_id: 6 MiB of content, past the page's budget.
    const content = "x".repeat(2 * 1024 * 1024);
    for (const agent of ["b1", "b2", "b3"]) expect((await ann.put("/v1/agent-sessions", { agent, session_id: "big", content })).status).toBe(201);
    const first = await ann.get("/v1/agent-sessions?session_id=big");
    expect(first.status).toBe(200);
    expect(first.body.data.sessions.map((s: { agent: string }) => s.agent)).toEqual(["b3", "b2"]);
    expect(first.body.data.sessions.reduce((n: number, s: { content: string }) => n + s.content.length, 0)).toBeLessThanOrEqual(MAX_SESSION_CONTENT_BYTES_PER_PAGE);
    expect(first.body.data.has_more).toBe(true);
    const rest = await ann.get(`/v1/agent-sessions?session_id=big&cursor=${encodeURIComponent(first.body.data.next_cursor)}`);
    expect(rest.body.data.sessions.map((s: { agent: string; content: string }) => [s.agent, s.content.length])).toEqual([["b1", content.length]]);
    expect(rest.body.data.has_more).toBe(false);
    // One session is always served, however large: a page never comes back empty with more to read.
    const big = "y".repeat(MAX_SESSION_BYTES);
    expect((await ann.put("/v1/agent-sessions", { agent: "b4", session_id: "big", content: big })).status).toBe(201);
    const alone = await ann.get("/v1/agent-sessions?session_id=big");
    expect(alone.body.data.sessions.map((s: { agent: string; content: string }) => [s.agent, s.content.length])).toEqual([["b4", big.length]]);
    expect(alone.body.data.has_more).toBe(true);
  }, 60_000);

  // PUT wrote the file to the upload store before it checked the user's limits, and deleted it again
  // (best effort) once refused: a refused PUT cost a write of up to 5 MiB, and left the object behind
  // whenever the delete failed. The limits are checked first now; the transaction checks again under the lock.
  it("a PUT refused for the user's limits writes nothing to the upload store", async () => {
    const dee = await h.user("Dee");
    await h.db.agentSession.createMany({
      data: Array.from({ length: MAX_SESSIONS_PER_USER }, (_, i) => ({ id: newId(), ownerId: dee.id, agent: "codex", sessionId: `old-${i}`, contentType: "x", contentHash: "0", sizeBytes: 1, storeKey: `agent-sessions/${dee.id}/none/${i}` })),
    });
    const eve = await h.user("Eve");
    await h.db.agentSession.create({ data: { id: newId(), ownerId: eve.id, agent: "codex", sessionId: "huge", contentType: "x", contentHash: "0", sizeBytes: MAX_SESSION_BYTES_PER_USER - 10, storeKey: "agent-sessions/none" } });
    const store = new RecordingStore(blobDir);
    setBlobStore(store);
    try {
      expect((await dee.put("/v1/agent-sessions", { agent: "codex", session_id: "one-too-many", content: "x\n" })).status).toBe(409);
      expect((await eve.put("/v1/agent-sessions", { agent: "codex", session_id: "more", content: "x".repeat(20) })).status).toBe(413);
      expect(store.written).toEqual([]);
      // A replacement within the limits is still written.
      expect((await dee.put("/v1/agent-sessions", { agent: "codex", session_id: "old-0", content: "y\n" })).status).toBe(200);
      expect(store.written).toHaveLength(1);
    } finally {
      setBlobStore(blobs);
    }
  });

  it("rejects oversized or incomplete sessions without writing", async () => {
    const ann = await h.user("Big");
    const big = await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "big", content: "x".repeat(5 * 1024 * 1024 + 1) });
    expect(big.status).toBe(413);
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", content: "x" })).status).toBe(400);
    expect((await ann.get("/v1/agent-sessions")).body.data.sessions).toEqual([]);
  });

  it("takes a session file of up to 5 MiB however large its JSON encoding (escapes), and no body past that bound", async () => {
    const ann = await h.user("Escaped");
    // Each control character is one byte of the file and six of its JSON string (\u0001): 30 MiB of body.
    const content = "\u0001".repeat(MAX_SESSION_BYTES);
    const res = await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "escaped", content });
    expect(res.status, res.text.slice(0, 300)).toBe(201);
    expect(res.body.data.size_bytes).toBe(MAX_SESSION_BYTES);
    // Past what any 5 MiB file needs, the body is still refused unread.
    const over = await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "over", content: "\u0001".repeat(MAX_SESSION_BYTES + 20_000) });
    expect(over.status).toBe(413);
    expect(over.body.error.code).toBe("body_too_large");
  }, 60_000);

  it("a PUT whose COMMIT went through but whose reply was lost keeps the object the row points at", async () => {
    const ann = await h.user("Lost reply");
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "lost", content: "first\n" })).status).toBe(201);
    // The real transaction commits; then the call fails as a connection lost before COMMIT's reply would.
    let lost = false;
    const lostReply = new Proxy(h.db, {
      get(target, key) {
        // Once: the PUT's own transaction (the connection a re-read then takes is sound).
        if (key !== "$transaction" || lost) return Reflect.get(target, key);
        return async (...args: unknown[]) => {
          lost = true;
          await (target.$transaction as (...a: unknown[]) => Promise<unknown>)(...args);
          throw Object.assign(new Error("Server has closed the connection."), { code: "P1017" });
        };
      },
    });
    const put = await putAgentSession(sessionContext(h, ann, lostReply), { agent: "codex", session_id: "lost", content: "second\n" });
    expect(put).toMatchObject({ created: false, session: { session_id: "lost", size_bytes: 7 } });
    const read = await ann.get("/v1/agent-sessions?agent=codex&session_id=lost");
    expect(read.body.data.sessions.map((s: { content: string }) => s.content)).toEqual(["second\n"]);
    // Nothing is left behind either: the first version's object went once the switch was known to have committed.
    const row = await h.db.agentSession.findFirstOrThrow({ where: { ownerId: ann.id, sessionId: "lost" } });
    expect(sessionObjects(ann.id)).toEqual([row.storeKey]);
  });

  it.skipIf(!testPostgres())("a PUT that failed while its COMMIT was still on its way keeps the object the row then points at", async () => {
    // The call fails (a connection lost) while the transaction, still open on the server, has yet to
    // commit: a re-read on another connection saw the old version, deleted the new object, and the
    // commit then left the row pointing at nothing.
    const ann = await h.user("Commit in flight");
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "in-flight", content: "first\n" })).status).toBe(201);
    let commit: Promise<unknown> | undefined;
    const inFlight = new Proxy(h.db, {
      get(target, key) {
        if (key !== "$transaction" || commit) return Reflect.get(target, key);
        return async (fn: (tx: unknown) => Promise<unknown>) => {
          let written!: () => void;
          const done = new Promise<void>((resolve) => (written = resolve));
          commit = (target.$transaction as (f: (tx: unknown) => Promise<unknown>) => Promise<unknown>)(async (tx) => {
            const result = await fn(tx);
            written();
            await new Promise((resolve) => setTimeout(resolve, 500));
            return result;
          });
          await done;
          throw Object.assign(new Error("Server has closed the connection."), { code: "P1017" });
        };
      },
    });
    const put = await putAgentSession(sessionContext(h, ann, inFlight), { agent: "codex", session_id: "in-flight", content: "second\n" }).catch((error: unknown) => error);
    await commit;
    const read = await ann.get("/v1/agent-sessions?agent=codex&session_id=in-flight");
    expect(read.body.data.sessions.map((s: { content: string }) => s.content)).toEqual(["second\n"]);
    const row = await h.db.agentSession.findFirstOrThrow({ where: { ownerId: ann.id, sessionId: "in-flight" } });
    expect(sessionObjects(ann.id)).toContain(row.storeKey);
    expect(put).toMatchObject({ created: false, session: { session_id: "in-flight", size_bytes: 7 } });
  });

  it("a PUT whose transaction failed deletes the object it wrote, and the row keeps its version", async () => {
    const ann = await h.user("Failed write");
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "failed", content: "first\n" })).status).toBe(201);
    let failed = false;
    const failing = new Proxy(h.db, {
      get(target, key) {
        // Once: the PUT's own transaction (the connection a re-read then takes is sound).
        if (key !== "$transaction" || failed) return Reflect.get(target, key);
        return async () => {
          failed = true;
          throw Object.assign(new Error("Server has closed the connection."), { code: "P1017" });
        };
      },
    });
    await expect(putAgentSession(sessionContext(h, ann, failing), { agent: "codex", session_id: "failed", content: "second\n" })).rejects.toThrow(/closed the connection/);
    const read = await ann.get("/v1/agent-sessions?agent=codex&session_id=failed");
    expect(read.body.data.sessions.map((s: { content: string }) => s.content)).toEqual(["first\n"]);
    const row = await h.db.agentSession.findFirstOrThrow({ where: { ownerId: ann.id, sessionId: "failed" } });
    expect(sessionObjects(ann.id)).toEqual([row.storeKey]);
  });

  it("keeps session files in the upload store; a replaced version's object is deleted", async () => {
    const ann = await h.user("Store");
    const first = await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "st-1", content: "one\n" });
    expect(first.status, first.text).toBe(201);
    const row1 = await h.db.agentSession.findUniqueOrThrow({ where: { id: first.body.data.id } });
    expect(row1.storeKey.split("/")).toHaveLength(4);
    expect((await readAll(blobs, row1.storeKey)).toString("utf8")).toBe("one\n");
    expect(await h.db.agentSessionBlob.count({ where: { key: { startsWith: `agent-sessions/${row1.ownerId}/` } } })).toBe(0);
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "st-1", content: "one\ntwo\n" })).status).toBe(200);
    const row2 = await h.db.agentSession.findUniqueOrThrow({ where: { id: first.body.data.id } });
    expect(row2.storeKey).not.toBe(row1.storeKey);
    expect(await blobs.head(row1.storeKey)).toBeNull();
    expect((await readAll(blobs, row2.storeKey)).toString("utf8")).toBe("one\ntwo\n");
    expect((await ann.get("/v1/agent-sessions?session_id=st-1")).body.data.sessions[0].content).toBe("one\ntwo\n");
  });

  it("sessions stored in the database before the move stay readable and move to the upload store on their next write", async () => {
    const ann = await h.user("Legacy");
    const me = (await h.db.user.findFirstOrThrow({ where: { name: "Legacy" } })).id;
    const id = newId();
    const key = `agent-sessions/${me}/${id}`;
    await h.db.agentSessionBlob.create({ data: { key, content: "legacy transcript\n" } });
    await h.db.agentSession.create({
      data: { id, ownerId: me, agent: "claude-code", sessionId: "old-1", contentType: "application/x-ndjson", contentHash: "x", sizeBytes: 18, storeKey: key },
    });
    const read = await ann.get("/v1/agent-sessions?session_id=old-1");
    expect(read.status, read.text).toBe(200);
    expect(read.body.data.sessions[0].content).toBe("legacy transcript\n");
    expect((await ann.put("/v1/agent-sessions", { agent: "claude-code", session_id: "old-1", content: "new transcript\n" })).status).toBe(200);
    expect(await h.db.agentSessionBlob.findUnique({ where: { key } })).toBeNull();
    const row = await h.db.agentSession.findUniqueOrThrow({ where: { id } });
    expect((await readAll(blobs, row.storeKey)).toString("utf8")).toBe("new transcript\n");
    expect((await ann.get("/v1/agent-sessions?session_id=old-1")).body.data.sessions[0].content).toBe("new transcript\n");
  });

  it("a session replaced while it is being read serves its new version, never a 500", async () => {
    const ann = await h.user("Racer");
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "race-1", content: "old\n" })).status).toBe(201);
    // The embedded store, with a PUT of a new version landing between the row's read and the file's
    // (that PUT deletes the version the row named).
    const store = new ReplacedBeforeRead(blobDir, () => ann.put("/v1/agent-sessions", { agent: "codex", session_id: "race-1", content: "new\n" }));
    setBlobStore(store);
    try {
      const read = await ann.get("/v1/agent-sessions?session_id=race-1");
      expect(read.status, read.text).toBe(200);
      expect(store.replaced).toBe(true);
      expect(read.body.data.sessions).toHaveLength(1);
      expect(read.body.data.sessions[0]).toMatchObject({ session_id: "race-1", content: "new\n", size_bytes: 4 });
    } finally {
      setBlobStore(blobs);
    }
  });
});

/** The keys of `ownerId`'s session objects in the embedded upload store. */
function sessionObjects(ownerId: string): string[] {
  const dir = path.join(blobDir, "agent-sessions", ownerId);
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && !entry.name.endsWith(".meta.json"))
    .map((entry) => path.relative(blobDir, path.join(entry.parentPath, entry.name)).split(path.sep).join("/"));
}

class ReplacedBeforeRead extends LocalBlobStore {
  replaced = false;
  constructor(
    dir: string,
    private readonly replace: () => Promise<unknown>,
  ) {
    super(dir);
  }

  override async read(key: string, range?: { start: number; end: number }) {
    if (!this.replaced) {
      this.replaced = true;
      await this.replace();
    }
    return super.read(key, range);
  }
}

/** The embedded store, noting each key written. */
class RecordingStore extends LocalBlobStore {
  written: string[] = [];

  override async write(...args: Parameters<LocalBlobStore["write"]>) {
    this.written.push(args[0]);
    return super.write(...args);
  }
}
