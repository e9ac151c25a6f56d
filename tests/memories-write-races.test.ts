import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { createHash } from "node:crypto";
import { runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { updateMemory } from "@/lib/memories/update-memory.ts";
import { newId } from "@/lib/ids.ts";
import { indexMemories } from "./recall-helpers.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { setDatabase } from "@/lib/db/database.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h.close());

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** Runs `body` with Date frozen at the present (moved only by vi.setSystemTime): writes landing in one millisecond are the point. */
async function onFrozenClock(body: () => Promise<void>): Promise<void> {
  vi.useFakeTimers({ toFake: ["Date"] });
  try {
    vi.setSystemTime(Date.now());
    await body();
  } finally {
    vi.useRealTimers();
  }
}

describe("PATCH against a re-push of the same source_path", () => {
  // A PATCH writes only if updated_at is still the one it read, which works only while every write
  // moves updated_at forward. A re-push wrote its request's start instead: when that was the instant
  // already stored (the same millisecond, or behind a burst of edits that ran updated_at ahead of the
  // clock), the PATCH's write went through on a stale read and put back the old content's hash.
  test("a re-push that lands between a PATCH's read and its write makes the PATCH read again", async () => {
    await onFrozenClock(async () => {
      const created = (await ann.post("/v1/memories", { content: "version one of the notes", source_path: "notes/race.md" })).body.data;
      const push = async () => {
        const res = await ann.post("/v1/memories", { content: "version two of the notes", source_path: "notes/race.md" });
        expect(res.status).toBe(200);
        expect(res.body.data.version).toBe(2);
      };
      const patched = await updateMemory(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], push)), created.id, { tags: ["edited"] });
      expect(patched).toMatchObject({ tags: ["edited"], content: "version two of the notes", content_hash: sha256("version two of the notes"), version: 2 });
      const row = await h.db.memory.findUniqueOrThrow({ where: { id: created.id } });
      expect(row.content).toBe("version two of the notes");
      expect(row.contentHash).toBe(sha256("version two of the notes"));
      expect(row.tags).toEqual(["edited"]);
    });
  });
});

describe("PATCH against a dream's archive or a move in the same millisecond", () => {
  // The PATCH's updated_at check holds only while every write moves updated_at forward. A dream's
  // archive of a superseded memory and a batch move wrote the clock's now instead: with the clock on
  // the instant the PATCH read (or behind it, after an edit burst), the PATCH went through on its stale
  // read and wrote back the state (and everything else) it had read.
  test("a dream archiving the memory between a PATCH's read and its write makes the PATCH read again", async () => {
    await onFrozenClock(async () => {
      const hubId = await h.teamHub(ann);
      const push = async (content: string) => (await ann.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
      const older = await push("Use pnpm, not npm, for installing dependencies in the web repo.");
      vi.setSystemTime(Date.now() + 60_000);
      const newer = await push("In the web repo we install dependencies with pnpm instead of npm.");
      await indexMemories(h.db, [older, newer]);
      const dream = async () => {
        const runId = (await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id as string;
        expect(await runDreamRunOnce(h.db, runId)).toBe(true);
        expect(await h.db.memory.findUniqueOrThrow({ where: { id: older } })).toMatchObject({ state: "archived", supersededBy: newer });
      };
      // The older one last written at the clock's instant, which the dream's archive then writes again.
      await h.db.memory.update({ where: { id: older }, data: { updatedAt: new Date() } });
      await updateMemory(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], dream)), older, { tags: ["edited"] });
      const row = await h.db.memory.findUniqueOrThrow({ where: { id: older } });
      expect(row).toMatchObject({ state: "archived", supersededBy: newer, tags: ["edited"] });
    });
  }, 60_000);

  test("a move after an edit burst, between a PATCH's read and its write, does not let the PATCH undo the edits", async () => {
    await onFrozenClock(async () => {
      const hubId = await h.teamHub(ann);
      const topic = (await ann.post("/v1/topics", { name: "Tooling", hub_id: hubId })).body.data.id as string;
      const id = (await ann.post("/v1/memories", { content: "The build uses esbuild." }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
      const others = async () => {
        // Another edit in the same millisecond runs updated_at one ahead of the clock; the move then wrote the clock's now.
        expect((await ann.patch(`/v1/memories/${id}`, { state: "archived" })).status).toBe(200);
        const moved = await ann.post("/v1/memories/batch-move", { ids: [id], hub_id: hubId, topic_id: topic });
        expect(moved.body.data.moved).toBe(1);
      };
      await updateMemory(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], others)), id, { tags: ["edited"] });
      const row = await h.db.memory.findUniqueOrThrow({ where: { id } });
      expect(row).toMatchObject({ state: "archived", topicId: topic, tags: ["edited"] });
    });
  });
});

describe("PATCH against an undo or a topic filing in the same millisecond", () => {
  // An undo's restore and a filing into a topic wrote the clock's now as updated_at: with the clock on
  // the instant the PATCH read, the PATCH's write went through on its stale read and put back the
  // state (or topic) it had read.
  test("an undo restoring an archived memory between a PATCH's read and its write makes the PATCH read again", async () => {
    await onFrozenClock(async () => {
      const hubId = await h.teamHub(ann);
      const id = (await ann.post("/v1/memories", { content: "Deploys go out on Tuesdays." }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
      const now = new Date();
      // As a dream's archive leaves it, written at the clock's instant.
      await h.db.memory.update({ where: { id }, data: { state: "archived", updatedAt: now } });
      const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", createdAt: now } });
      const action = await h.db.dreamAction.create({
        data: { id: newId(), runId: run.id, hubId, actionType: "archive", state: "applied", sourceMemoryIds: [id], reason: "stale", details: {}, createdAt: now },
      });
      const undo = async () => expect((await ann.post(`/v1/dreams/actions/${action.id}/undo`)).status).toBe(200);
      await updateMemory(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], undo)), id, { tags: ["edited"] });
      expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ state: "active", tags: ["edited"] });
    });
  });

  test("a filing after an edit burst, between a PATCH's read and its write, does not let the PATCH undo the edits", async () => {
    await onFrozenClock(async () => {
      const hubId = await h.teamHub(ann);
      const topic = (await ann.post("/v1/topics", { name: "Releases", hub_id: hubId })).body.data.id as string;
      const id = (await ann.post("/v1/memories", { content: "Releases are tagged from main." }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
      await h.db.memory.update({ where: { id }, data: { updatedAt: new Date() } });
      const others = async () => {
        // Another edit in the same millisecond runs updated_at one ahead of the clock; the filing then wrote the clock's now back.
        expect((await ann.patch(`/v1/memories/${id}`, { tags: ["burst"] })).status).toBe(200);
        expect((await ann.post(`/v1/topics/${topic}/memories`, { memory_id: id })).status).toBeLessThan(300);
      };
      await updateMemory(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], others)), id, { title: "Release tags" });
      expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ topicId: topic, title: "Release tags", tags: ["burst"] });
    });
  });
});

describe("a writer that sets updated_at without the helpers", () => {
  // Each writer moved updated_at past the stored one itself (GREATEST(now, updated_at + 1 ms)); one that
  // wrote the clock's now instead gave two writes in one millisecond (or one after the clock stepped
  // back) the same or an earlier updated_at, unseen by clients and by a PATCH's check. The database
  // moves it now, for any update that sets it.
  test("two writes in the same millisecond, and one after the clock stepped back, each get a later updated_at", async () => {
    await onFrozenClock(async () => {
      const id = (await ann.post("/v1/memories", { content: "The staging database is reset every Sunday." })).body.data.id as string;
      const stored = (await h.db.memory.findUniqueOrThrow({ where: { id } })).updatedAt.getTime();
      const write = async (title: string) => (await h.db.memory.update({ where: { id }, data: { title, updatedAt: new Date() } })).updatedAt.getTime();
      expect(await write("Same tick")).toBe(stored + 1);
      expect(await write("Same tick again")).toBe(stored + 2);
      vi.setSystemTime(stored - 60_000);
      expect(await write("Clock stepped back")).toBe(stored + 3);
      await h.db.$executeRaw`UPDATE memories SET updated_at = ${new Date()} WHERE id = ${id}::uuid`;
      expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).updatedAt.getTime()).toBe(stored + 4);
      // A clock ahead of the stored value is written as it is.
      vi.setSystemTime(stored + 60_000);
      expect(await write("Later")).toBe(stored + 60_000);
    });
  });

  test("such a write between a PATCH's read and its write makes the PATCH read again", async () => {
    await onFrozenClock(async () => {
      const id = (await ann.post("/v1/memories", { content: "Feature flags live in the flags service." })).body.data.id as string;
      const archive = () => h.db.memory.update({ where: { id }, data: { state: "archived", updatedAt: new Date() } });
      await updateMemory(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], archive)), id, { tags: ["edited"] });
      expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ state: "archived", tags: ["edited"] });
    });
  });

  test("updates that do not set updated_at (the pipeline's, access counts) keep it", async () => {
    const id = (await ann.post("/v1/memories", { content: "Logs are kept for 30 days." })).body.data.id as string;
    const stored = (await h.db.memory.findUniqueOrThrow({ where: { id } })).updatedAt;
    await h.db.memory.update({ where: { id }, data: { processingStatus: "done", summary: "Log retention", accessCount: { increment: 1 } } });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).updatedAt).toEqual(stored);
  });
});

describe("a push of content the hub holds, against a move or an edit of that memory", () => {
  // A push found its duplicate's id in one statement and loaded it by id alone in the next. The duplicate
  // is not locked (the content's advisory lock is the pushing hub's, a move takes the target hub's), so a
  // move committing between the two made the push answer "already saved" with a memory now in another
  // hub, and an edit of its content "already saved" with a different content_hash; nothing was stored.
  /** Runs `between` once, right after the push's read of its targets (the duplicate check) returns. */
  function afterPushTargets(between: () => Promise<unknown>) {
    let done = false;
    const db = h.database.prisma.$extends({
      query: {
        async $allOperations({ operation, args, query }) {
          const found = await query(args);
          if (!done && operation === "$queryRaw" && JSON.stringify(args).includes("duplicate_id")) {
            done = true;
            await between();
          }
          return found;
        },
      },
    });
    setDatabase({ ...h.database, prisma: db as unknown as typeof h.database.prisma });
    return () => done;
  }

  test.skipIf(!testPostgres())("a duplicate moved to another hub meanwhile is not the push's answer: the push stores the memory in its hub", async () => {
    const teamId = await h.teamHub(ann);
    const content = `# Runbook\n\nmoved while pushed again ${Math.random()}`;
    const first = (await ann.post("/v1/memories", { content })).body.data;
    const ran = afterPushTargets(async () => {
      const moved = await ann.post("/v1/memories/batch-move", { ids: [first.id], hub_id: teamId });
      expect(moved.body.data.moved).toBe(1);
    });
    let res;
    try {
      res = await ann.post("/v1/memories", { content });
    } finally {
      setDatabase(h.database);
    }
    expect(ran()).toBe(true);
    expect(res.status).toBe(201);
    expect(res.body.data.id).not.toBe(first.id);
    expect(res.body.data.hub_id).toBe(ann.personalHubId);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId, contentHash: sha256(content) } })).toBe(1);
  });

  test.skipIf(!testPostgres())("a duplicate whose content was edited meanwhile is not the push's answer: the push stores its content", async () => {
    const content = `# Notes\n\nedited while pushed again ${Math.random()}`;
    const first = (await ann.post("/v1/memories", { content })).body.data;
    afterPushTargets(async () => expect((await ann.patch(`/v1/memories/${first.id}`, { content: "# Notes\n\nsomething else now" })).status).toBe(200));
    let res;
    try {
      res = await ann.post("/v1/memories", { content });
    } finally {
      setDatabase(h.database);
    }
    expect(res.status).toBe(201);
    expect(res.body.data.content_hash).toBe(sha256(content));
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: res.body.data.id } })).content).toBe(content);
  });
});
