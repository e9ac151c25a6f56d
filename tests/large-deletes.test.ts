import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { customBoardsIdle } from "@/lib/boards/kick-custom-board.ts";
import { PURGE_BATCHES_PER_HUB, purgeDeletedHub, purgeDeletedHubs } from "@/lib/hubs/purge-deleted-hubs.ts";
import { newId } from "@/lib/ids.ts";
import { deleteAccountData, eraseAccountData } from "@/lib/users/delete-account-data.ts";
import { ACCOUNT_DELETION_SWEEP_ATTEMPTS, resumeAccountDataDeletions } from "@/lib/users/resume-account-data-deletions.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Deleting a hub, or an account's data, of 100,000s of memories: one transaction outlasted the
// transaction timeout (20 s) and failed on every attempt. The memories now go a bounded batch
// (ENGRAM_PURGE_BATCH) per transaction; a hub delete cut short is finished by the sweep.

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
  // Which transaction deleted each memory, and a memory whose delete fails (standing for a crash mid-way).
  await h.db.$executeRawUnsafe(`CREATE TABLE test_deleted_memories (memory_id uuid, hub_id uuid, txid bigint)`);
  await h.db.$executeRawUnsafe(`
    CREATE FUNCTION test_record_memory_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF OLD.title = 'Undeletable' AND NOT EXISTS (SELECT 1 FROM pg_class WHERE relname = 'test_allow_undeletable') THEN
        RAISE EXCEPTION 'test: this memory cannot be deleted yet';
      END IF;
      INSERT INTO test_deleted_memories VALUES (OLD.id, OLD.hub_id, txid_current());
      RETURN OLD;
    END $$`);
  await h.db.$executeRawUnsafe(`CREATE TRIGGER test_record_memory_delete BEFORE DELETE ON memories FOR EACH ROW EXECUTE FUNCTION test_record_memory_delete()`);
  process.env.ENGRAM_PURGE_BATCH = "2";
});
afterEach(async () => {
  await h.db.$executeRawUnsafe(`DROP TABLE IF EXISTS test_allow_undeletable`);
});
afterAll(async () => {
  delete process.env.ENGRAM_PURGE_BATCH;
  await h?.close();
});

async function push(who: Client, hubId: string, count: number, title = "Note") {
  for (let i = 0; i < count; i++) {
    const res = await who.post("/v1/memories", { title, content: `${title} number ${i} of ${hubId}.` }, { headers: { "x-hub-id": hubId } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  }
}

/** The most memories of this hub one transaction deleted, and how many memories were deleted in all. */
async function deletesPerTransaction(hubId: string) {
  const rows = await h.db.$queryRaw<{ most: number; total: number }[]>`
    SELECT coalesce(max(n), 0)::int AS most, coalesce(sum(n), 0)::int AS total
      FROM (SELECT count(*) AS n FROM test_deleted_memories WHERE hub_id = ${hubId}::uuid GROUP BY txid) per_tx`;
  return rows[0]!;
}

describe("deleting a large hub", () => {
  it("deletes its memories a bounded batch per transaction, and everything of the hub goes", async () => {
    const ann = await h.user("Ann");
    const hubId = await h.teamHub(ann);
    await push(ann, hubId, 5);
    const res = await ann.delete(`/v1/hubs/${hubId}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toEqual({ id: hubId, hub_id: hubId, deleted: true });
    expect(await deletesPerTransaction(hubId)).toEqual({ most: 2, total: 5 });
    expect(await h.db.memory.count({ where: { hubId } })).toBe(0);
    expect(await h.db.hub.count({ where: { id: hubId } })).toBe(0);
  });

  it("a delete cut short is gone for everyone at once, frees its slug, and the sweep finishes it", async () => {
    const ann = await h.user("Ann");
    const bob = await h.user("Bob");
    const hubId = await h.teamHub(ann, [[bob, "contributor"]]);
    const slug = (await h.db.hub.findUniqueOrThrow({ where: { id: hubId } })).slug;
    await push(ann, hubId, 3);
    await push(bob, hubId, 1, "Undeletable");
    const res = await ann.delete(`/v1/hubs/${hubId}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // Some memories are still there, but no one reaches the hub or writes to it any more.
    expect(await h.db.memory.count({ where: { hubId } })).toBeGreaterThan(0);
    for (const who of [ann, bob]) {
      expect((await who.get(`/v1/hubs/${hubId}`)).status).toBe(404);
      expect((await who.post("/v1/memories", { content: "Late note." }, { headers: { "x-hub-id": hubId } })).status).toBe(404);
      expect((await who.get("/v1/hubs")).body.data.map((row: { hub: { id: string } }) => row.hub.id)).not.toContain(hubId);
    }
    expect((await ann.delete(`/v1/hubs/${hubId}`)).status).toBe(404);
    expect((await ann.post("/v1/hubs", { name: "Again", slug })).status).toBe(201);

    await h.db.$executeRawUnsafe(`CREATE TABLE test_allow_undeletable ()`);
    expect(await purgeDeletedHubs(h.db)).toBe(1);
    expect(await h.db.memory.count({ where: { hubId } })).toBe(0);
    expect(await h.db.hub.count({ where: { id: hubId } })).toBe(0);
    expect((await deletesPerTransaction(hubId)).most).toBeLessThanOrEqual(2);
  });
});

describe("the deleted hubs sweep", () => {
  /** A team hub of ann's with `count` memories, marked deleted as a delete whose purge was cut short leaves it. */
  async function cutShort(ann: Client, count: number, deletedAt: Date) {
    const hubId = await h.teamHub(ann);
    await push(ann, hubId, count);
    await h.db.hubMember.deleteMany({ where: { hubId } });
    await h.db.hub.update({ where: { id: hubId }, data: { deletedAt, slug: `deleted:${hubId}` } });
    return hubId;
  }

  it("carries on past a hub that fails to purge, and does not try that hub first again", async () => {
    const ann = await h.user("Ann");
    // Deleted first, and its purge fails (a memory the database refuses to delete).
    const failing = await h.teamHub(ann);
    await push(ann, failing, 1, "Undeletable");
    expect((await ann.delete(`/v1/hubs/${failing}`)).status).toBe(200);
    expect(await h.db.hub.count({ where: { id: failing } })).toBe(1);
    const later = await cutShort(ann, 3, new Date(Date.now() + 60_000));

    expect(await purgeDeletedHubs(h.db)).toBe(1);
    expect(await h.db.hub.count({ where: { id: later } })).toBe(0);
    expect(await h.db.memory.count({ where: { hubId: later } })).toBe(0);
    expect(await h.db.hub.count({ where: { id: failing } })).toBe(1);

    // A sweep that reaches only one hub takes one deleted since, not the one that failed last time.
    const latest = await cutShort(ann, 1, new Date(Date.now() + 120_000));
    expect(await purgeDeletedHubs(h.db, 1)).toBe(1);
    expect(await h.db.hub.count({ where: { id: latest } })).toBe(0);

    // Once it can be purged, the sweep finishes it.
    await h.db.$executeRawUnsafe(`CREATE TABLE test_allow_undeletable ()`);
    expect(await purgeDeletedHubs(h.db)).toBe(1);
    expect(await h.db.hub.count({ where: { id: failing } })).toBe(0);
    expect(await h.db.memory.count({ where: { hubId: failing } })).toBe(0);
  });
});

describe("a hub whose row delete keeps finding a memory written after the last batch", () => {
  // purgeDeletedHub goes round again when a memory landed after its last batch (a dream's, a move's).
  // When one lands every round, the sweep (which passes no deadline) went round for good and the
  // sweep, and every deleted hub after this one, never finished.
  it("gives up after a bounded number of rounds, and the sweep goes on", async () => {
    const ann = await h.user("Ann");
    const hubId = await h.teamHub(ann);
    await push(ann, hubId, 1, "Reborn");
    await h.db.hubMember.deleteMany({ where: { hubId } });
    await h.db.hub.update({ where: { id: hubId }, data: { deletedAt: new Date(), slug: `deleted:${hubId}` } });
    // Each attempt to delete the hub row finds a new memory of it instead (a copy of the one pushed).
    await h.db.$executeRawUnsafe(`CREATE TABLE test_reborn AS SELECT * FROM memories WHERE hub_id = '${hubId}'::uuid`);
    await h.db.$executeRawUnsafe(`
      CREATE FUNCTION test_reborn() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO memories SELECT (json_populate_record(t, json_build_object('id', gen_random_uuid()))).* FROM test_reborn t WHERE t.hub_id = OLD.id;
        RETURN NULL;
      END $$`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER test_reborn BEFORE DELETE ON hubs FOR EACH ROW WHEN (OLD.id = '${hubId}'::uuid) EXECUTE FUNCTION test_reborn()`);
    try {
      // Raced against a timer: without a bound the purge never returns.
      const purged = await Promise.race([
        purgeDeletedHub(h.db, hubId),
        new Promise<"still purging after 10 s">((resolve) => setTimeout(() => resolve("still purging after 10 s"), 10_000)),
      ]);
      expect(purged).toBe(false);
      expect(await h.db.hub.count({ where: { id: hubId } })).toBe(1);
    } finally {
      await h.db.$executeRawUnsafe(`DROP TRIGGER test_reborn ON hubs`);
      await h.db.$executeRawUnsafe(`DROP FUNCTION test_reborn()`);
      await h.db.$executeRawUnsafe(`DROP TABLE test_reborn`);
    }
    // Once nothing writes into it any more, the sweep finishes it.
    expect(await purgeDeletedHub(h.db, hubId)).toBe(true);
    expect(await h.db.memory.count({ where: { hubId } })).toBe(0);
  });
});

describe("a deleted hub whose memories keep coming back as fast as the sweep deletes them", () => {
  // The sweep passes no deadline, and deleteHubMemories went on as long as each batch found memories:
  // a hub refilled as fast as it was emptied held the sweep, and every deleted hub after it, for good.
  it("gets a bounded number of batches per sweep, and the hubs deleted after it are purged", async () => {
    const ann = await h.user("Ann");
    const endless = await h.teamHub(ann);
    await push(ann, endless, 2, "Endless");
    await h.db.hubMember.deleteMany({ where: { hubId: endless } });
    await h.db.hub.update({ where: { id: endless }, data: { deletedAt: new Date(Date.now() - 60_000), slug: `deleted:${endless}` } });
    const later = await h.teamHub(ann);
    await push(ann, later, 1);
    await h.db.hubMember.deleteMany({ where: { hubId: later } });
    await h.db.hub.update({ where: { id: later }, data: { deletedAt: new Date(), slug: `deleted:${later}` } });
    // Each memory of the endless hub deleted comes back under a new id (a real trigger, nothing mocked),
    // 1,500 times: far more than a sweep may delete of one hub (200 batches of 2), and few enough that a
    // sweep without that bound still ends, here (a timer cannot cut it short: PGlite's statements never
    // yield to the event loop).
    await h.db.$executeRawUnsafe(`CREATE TABLE test_endless_left (n int)`);
    await h.db.$executeRawUnsafe(`INSERT INTO test_endless_left VALUES (1500)`);
    await h.db.$executeRawUnsafe(`
      CREATE FUNCTION test_endless() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE test_endless_left SET n = n - 1 WHERE n > 0;
        IF FOUND THEN
          INSERT INTO memories SELECT (json_populate_record(OLD, json_build_object('id', gen_random_uuid()))).*;
        END IF;
        RETURN NULL;
      END $$`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER test_endless AFTER DELETE ON memories FOR EACH ROW WHEN (OLD.hub_id = '${endless}'::uuid) EXECUTE FUNCTION test_endless()`);
    try {
      expect(await purgeDeletedHubs(h.db)).toBe(1);
      expect(await h.db.hub.count({ where: { id: later } })).toBe(0);
      // Left for the next sweep, with refills still to come: the sweep stopped on it, not the refills.
      expect(await h.db.hub.count({ where: { id: endless } })).toBe(1);
      const [left] = await h.db.$queryRawUnsafe<{ n: number }[]>(`SELECT n FROM test_endless_left`);
      expect(left!.n).toBe(1500 - 400);
    } finally {
      await h.db.$executeRawUnsafe(`DROP TRIGGER test_endless ON memories`);
      await h.db.$executeRawUnsafe(`DROP FUNCTION test_endless()`);
      await h.db.$executeRawUnsafe(`DROP TABLE test_endless_left`);
    }
    // Once nothing refills it, the next sweep finishes it.
    expect(await purgeDeletedHubs(h.db)).toBe(1);
    expect(await h.db.hub.count({ where: { id: endless } })).toBe(0);
  }, 180_000);
});

describe("a deleted hub's slug", () => {
  it("cannot be taken by anyone beforehand, so the hub's delete cannot be blocked", async () => {
    const ann = await h.user("Ann");
    const mallory = await h.user("Mallory");
    const hubId = await h.teamHub(ann);
    // Hub ids are not secret (members, invitees and invite pages see them).
    const squat = `deleted-${hubId.replaceAll("-", "")}`;
    const created = await mallory.post("/v1/hubs", { name: "Squat", slug: squat });
    expect(created.status, JSON.stringify(created.body)).toBe(400);
    expect(created.body.error).toMatchObject({ code: "invalid_request", details: { issues: [{ path: "slug" }] } });
    const own = await h.teamHub(mallory);
    const renamed = await mallory.patch(`/v1/hubs/${own}`, { slug: squat });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(400);
    expect(renamed.body.error.code).toBe("invalid_request");
    expect((await mallory.get(`/v1/hubs/check-slug?slug=${squat}`)).body.data).toMatchObject({ available: false, reason: "invalid" });
    // A name of that shape gets a slug of another.
    const derived = await mallory.post("/v1/hubs", { name: "Deleted things" });
    expect(derived.status).toBe(201);
    expect(derived.body.data.slug).not.toMatch(/^deleted-/);

    // A hub that took such a slug before it was reserved (or a hub deleted before this) blocks nothing either.
    await h.db.hub.update({ where: { id: own }, data: { slug: squat } });
    const res = await ann.delete(`/v1/hubs/${hubId}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await h.db.hub.count({ where: { id: hubId } })).toBe(0);
    // A hub deleted and not yet purged holds no slug anyone could ask for.
    const bob = await h.user("Bob");
    const kept = await h.teamHub(bob);
    await push(bob, kept, 1, "Undeletable");
    expect((await bob.delete(`/v1/hubs/${kept}`)).status).toBe(200);
    const { slug } = await h.db.hub.findUniqueOrThrow({ where: { id: kept } });
    expect((await bob.get(`/v1/hubs/check-slug?slug=${encodeURIComponent(slug)}`)).body.data).toMatchObject({ available: false, reason: "invalid" });
    await h.db.$executeRawUnsafe(`CREATE TABLE test_allow_undeletable ()`);
    expect(await purgeDeletedHub(h.db, kept)).toBe(true);
  });
});

describe("deleting a large account's data", () => {
  it("deletes the personal hub's memories a bounded batch per transaction", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 5);
    const res = await ann.delete("/v1/account/data");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ deleted: true, memories: 5 });
    expect(await deletesPerTransaction(ann.personalHubId)).toEqual({ most: 2, total: 5 });
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    // Finished by the request itself: nothing is left for the sweep.
    expect(await resumeAccountDataDeletions(h.db)).toBe(0);
  });

  it("a deletion cut short mid-way (some memories already gone) is finished by the sweep, without the caller", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 3);
    await push(ann, ann.personalHubId, 1, "Undeletable");
    expect((await ann.post("/v1/topics", { name: "Cooking" })).status).toBe(201);
    // The failing batch stands for a process stopped mid-way: the caller hears the deletion goes on
    // (the sweep's), not a result, and not a 500.
    const res = await ann.delete("/v1/account/data");
    expect([res.status, res.body.data]).toEqual([202, { deleted: false, status: "pending" }]);
    const left = await h.db.memory.count({ where: { hubId: ann.personalHubId } });
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThan(4);

    await h.db.$executeRawUnsafe(`CREATE TABLE test_allow_undeletable ()`);
    expect(await resumeAccountDataDeletions(h.db)).toBe(1);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    expect(await h.db.topic.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    expect((await deletesPerTransaction(ann.personalHubId)).most).toBeLessThanOrEqual(2);
    // Done once: the next sweep finds nothing, and the account stays usable.
    expect(await resumeAccountDataDeletions(h.db)).toBe(0);
    expect((await ann.post("/v1/memories", { content: "A fresh start." })).status).toBe(201);
  });

  it("a deletion that keeps failing is given up after a few sweeps (logged, mark cleared), and what is written after survives", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 1, "Undeletable");
    expect((await ann.delete("/v1/account/data")).status).toBe(202);
    const marked = async () => (await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).dataDeletionRequestedAt;
    expect(await marked()).not.toBeNull();
    const logged: string[] = [];
    const error = console.error;
    console.error = (...args: unknown[]) => void logged.push(String(args[0]));
    try {
      for (let sweep = 0; sweep < 3; sweep++) expect(await resumeAccountDataDeletions(h.db)).toBe(0);
      expect(await marked()).not.toBeNull();
      // One sweep more: given up instead of tried again.
      expect(await resumeAccountDataDeletions(h.db)).toBe(0);
    } finally {
      console.error = error;
    }
    expect(await marked()).toBeNull();
    expect(logged.filter((line) => /gave up/.test(line) && line.includes(ann.id))).toHaveLength(1);
    // The account is the user's again: what they write now stays, sweep after sweep, even once the memory could go.
    await push(ann, ann.personalHubId, 1, "Fresh");
    await h.db.$executeRawUnsafe(`CREATE TABLE test_allow_undeletable ()`);
    expect(await resumeAccountDataDeletions(h.db)).toBe(0);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(2);
    // Asked again, it is tried afresh (and goes through).
    expect((await ann.delete("/v1/account/data")).status).toBe(200);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
  });
});

describe("the account-data deletions sweep and a huge account", () => {
  // The sweep erased a marked account's memories with no cap on batches (the hub purge stops a hub at
  // PURGE_BATCHES_PER_HUB): an account of millions of memories, or one written in as fast as they went,
  // held the sweep, and every deletion after it, for good.
  it("deletes at most PURGE_BATCHES_PER_HUB batches of it per sweep, not counted as a failure, and the next sweep goes on", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 1);
    const seed = (await h.db.memory.findFirstOrThrow({ where: { hubId: ann.personalHubId } })).id;
    const batch = Number(process.env.ENGRAM_PURGE_BATCH);
    const total = PURGE_BATCHES_PER_HUB * batch + 3;
    await h.database.sql.query(
      `INSERT INTO memories SELECT (json_populate_record(NULL::memories, (row_to_json(m)::jsonb || jsonb_build_object('id', gen_random_uuid()))::json)).* FROM memories m, generate_series(2, $2::int) n WHERE m.id = $1::uuid`,
      [seed, total],
    );
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(total);
    // As a request whose process stopped leaves it: marked, its lease stale.
    await h.db.user.update({ where: { id: ann.id }, data: { dataDeletionRequestedAt: new Date(Date.now() - 60 * 60_000), dataDeletionHeartbeatAt: null } });

    expect(await resumeAccountDataDeletions(h.db)).toBe(0);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(3);
    // Left marked with its lease let go, and not counted as a failed attempt: it made progress.
    expect(await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).toMatchObject({ dataDeletionHeartbeatAt: null, dataDeletionAttempts: 0 });
    expect((await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).dataDeletionRequestedAt).not.toBeNull();

    expect(await resumeAccountDataDeletions(h.db)).toBe(1);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    expect((await deletesPerTransaction(ann.personalHubId)).most).toBeLessThanOrEqual(batch);
    expect((await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).dataDeletionRequestedAt).toBeNull();
  }, 60_000);
});

describe("the account-data deletion request and a huge account", () => {
  // The request went through every batch of the personal hub inline: an account of millions of memories
  // held it for hours, long after its caller had given up waiting.
  it("deletes at most PURGE_BATCHES_PER_HUB batches, answers 202 pending, and the sweep finishes it", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 1);
    const seed = (await h.db.memory.findFirstOrThrow({ where: { hubId: ann.personalHubId } })).id;
    const batch = Number(process.env.ENGRAM_PURGE_BATCH);
    await h.database.sql.query(
      `INSERT INTO memories SELECT (json_populate_record(NULL::memories, (row_to_json(m)::jsonb || jsonb_build_object('id', gen_random_uuid()))::json)).* FROM memories m, generate_series(2, $2::int) n WHERE m.id = $1::uuid`,
      [seed, PURGE_BATCHES_PER_HUB * batch + 3],
    );
    const res = await ann.delete("/v1/account/data");
    expect([res.status, res.body.data]).toEqual([202, { deleted: false, status: "pending" }]);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(3);
    // Its lease let go: the next sweep takes it up at once, and finishes it.
    expect(await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).toMatchObject({ dataDeletionHeartbeatAt: null, dataDeletionAttempts: 0 });
    expect(await resumeAccountDataDeletions(h.db)).toBe(1);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
  }, 60_000);
});

describe("an account-data deletion still running while sweeps come", () => {
  // A rolling deploy: every new instance's start-up sweep reads the mark while the request still
  // works through its batches. Each used to count as a failed attempt (each one that ran failed on the
  // memory the request held, here the undeletable one), the fourth gave the deletion up and cleared the
  // mark, and the request's next batch then stopped and answered 200 deleted with the data left.
  it("is neither counted nor given up by sweeps while its run keeps its lease, and the request finishes it", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 3);
    await push(ann, ann.personalHubId, 1, "Undeletable");
    const error = console.error;
    console.error = () => undefined;
    const sweeps = async () => {
      try {
        for (let sweep = 0; sweep < 4; sweep++) await resumeAccountDataDeletions(h.db);
      } finally {
        console.error = error;
      }
      await h.db.$executeRawUnsafe(`CREATE TABLE test_allow_undeletable ()`);
    };
    const result = await deleteAccountData(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], sweeps)));
    expect(result).toMatchObject({ deleted: true, memories: 4 });
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    expect(await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).toMatchObject({ dataDeletionRequestedAt: null, dataDeletionAttempts: 0 });
  });

  it("a request whose deletion was given up meanwhile answers 409, not deleted with part of the data left", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 3);
    // As a sweep leaves it once it gave the deletion up (its last run's lease stale): mark cleared, attempts past the cap.
    const givenUp = () => h.db.user.update({ where: { id: ann.id }, data: { dataDeletionRequestedAt: null, dataDeletionAttempts: ACCOUNT_DELETION_SWEEP_ATTEMPTS + 1 } });
    await expect(deleteAccountData(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], givenUp)))).rejects.toMatchObject({ code: "conflict" });
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(3);
  });

  it("a request whose deletion another run finished meanwhile answers deleted", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 3);
    const finish = async () => {
      const { dataDeletionRequestedAt } = await h.db.user.findUniqueOrThrow({ where: { id: ann.id } });
      expect((await eraseAccountData(h.db, ann.id, dataDeletionRequestedAt!)).finished).toBe(true);
    };
    expect(await deleteAccountData(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], finish)))).toMatchObject({ deleted: true });
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
  });
});

describe("what other hubs keep of a purged memory", () => {
  // A memory moved out of a hub stays named in that hub's reviews and boards; purged with the hub it was
  // moved to (or with the account's personal hub), those copies went on showing its content.
  async function copiesIn(who: Client, hubId: string) {
    const [mine, other] = [
      (await who.post("/v1/memories", { content: "The staging password rotates every 30 days." }, { headers: { "x-hub-id": hubId } })).body.data.id as string,
      (await who.post("/v1/memories", { content: "The staging password rotates every 90 days." }, { headers: { "x-hub-id": hubId } })).body.data.id as string,
    ];
    const run = await h.db.dreamRun.create({ data: { id: newId(), hubId, status: "completed", phase: "done" } });
    const review = await h.db.dreamAction.create({
      data: {
        id: newId(), runId: run.id, hubId, actionType: "contradiction", state: "pending_review", sourceMemoryIds: [mine, other], reason: "they disagree",
        details: { a: { id: mine, title: "A", excerpt: "SECRET-EXCERPT" }, b: { id: other, title: "B", excerpt: "excerpt of b" } },
      },
    });
    await h.db.notification.create({ data: { id: newId(), userId: who.id, hubId, kind: "review_contradiction", sourceKind: "dream_action", sourceId: review.id, payload: {} } });
    const now = new Date();
    const board = await h.db.customBoard.create({
      data: {
        id: newId(), hubId, createdBy: who.id, title: "Passwords", instruction: "How often do passwords rotate?", status: "active",
        cardPayload: { answer: "SECRET-ANSWER" }, cardCiteMemoryIds: [mine], cardState: "fresh", cardContentUpdatedAt: now, cardCreatedAt: now, createdAt: now, updatedAt: now,
      },
    });
    return { mine, review, board };
  }

  async function expectNoCopies({ mine, review, board }: Awaited<ReturnType<typeof copiesIn>>) {
    await customBoardsIdle();
    const action = await h.db.dreamAction.findUniqueOrThrow({ where: { id: review.id } });
    // The move out of the hub already closed the review (and dropped its copies); the purge must not bring any back.
    expect(action).toMatchObject({ state: "resolved", resolution: "memory_moved" });
    expect(JSON.stringify(action.details)).not.toMatch(/SECRET/);
    expect(await h.db.notification.count({ where: { sourceId: review.id, status: "pending" } })).toBe(0);
    const card = await h.db.customBoard.findUniqueOrThrow({ where: { id: board.id } });
    expect(card.cardCiteMemoryIds).not.toContain(mine);
    expect(JSON.stringify(card.cardPayload ?? null)).not.toMatch(/SECRET/);
  }

  it("a hub delete drops them, as a memory delete does", async () => {
    const ann = await h.user("Ann");
    const kept = await h.teamHub(ann);
    const doomed = await h.teamHub(ann);
    const copies = await copiesIn(ann, kept);
    const moved = await ann.post("/v1/memories/batch-move", { ids: [copies.mine], hub_id: doomed });
    expect(moved.status, moved.text).toBe(200);
    expect((await ann.delete(`/v1/hubs/${doomed}`)).status).toBe(200);
    expect(await h.db.memory.count({ where: { id: copies.mine } })).toBe(0);
    await expectNoCopies(copies);
  });

  it("an account-data delete drops them", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    const team = await h.teamHub(ann);
    const copies = await copiesIn(ann, team);
    const moved = await ann.post("/v1/memories/batch-move", { ids: [copies.mine], hub_id: ann.personalHubId });
    expect(moved.status, moved.text).toBe(200);
    expect((await ann.delete("/v1/account/data")).status).toBe(200);
    expect(await h.db.memory.count({ where: { id: copies.mine } })).toBe(0);
    await expectNoCopies(copies);
  });
});

describe("an older run of an account-data deletion that fails", () => {
  // Asked for again while an older run (a sweep's, or the first request's) still worked: the older run
  // failing let go of the lease its own mark no longer had, the newer request's, so the next sweep took
  // the deletion up under that request, counted it as failed and, the fourth time, gave it up.
  it("leaves the lease of the newer request as it is", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 1, "Undeletable");
    const older = new Date(Date.now() - 60_000);
    const newer = new Date();
    await h.db.user.update({ where: { id: ann.id }, data: { dataDeletionRequestedAt: newer, dataDeletionHeartbeatAt: newer } });
    await expect(eraseAccountData(h.db, ann.id, older)).rejects.toThrow(/cannot be deleted/);
    expect((await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).dataDeletionHeartbeatAt).not.toBeNull();
    // The newer request's run still holds it: a sweep leaves it alone.
    expect(await resumeAccountDataDeletions(h.db)).toBe(0);
    expect(await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).toMatchObject({ dataDeletionRequestedAt: newer, dataDeletionAttempts: 0 });
  });
});

describe("an older run of an account-data deletion while a newer request's run has stopped", () => {
  // The older run renewed every mark at or after its own, so it kept the newer request's lease fresh
  // though that request's process had stopped: the sweep could not take the newer deletion up until the
  // older run ended, and then only a lease later.
  it("renews only its own lease, so the sweep takes the newer deletion up", async () => {
    const ann = (await h.user("Ann")) as Client & { personalHubId: string };
    await push(ann, ann.personalHubId, 3);
    const older = new Date(Date.now() - 60 * 60_000);
    const newer = new Date(Date.now() - 30 * 60_000);
    const stale = new Date(Date.now() - 20 * 60_000);
    await h.db.user.update({ where: { id: ann.id }, data: { dataDeletionRequestedAt: newer, dataDeletionHeartbeatAt: stale } });
    // The newer mark is not this run's to clear: it goes on, its batches wanted by the newer mark.
    expect((await eraseAccountData(h.db, ann.id, older)).finished).toBe(true);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
    expect(await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).toMatchObject({ dataDeletionRequestedAt: newer, dataDeletionHeartbeatAt: stale });
    expect(await resumeAccountDataDeletions(h.db)).toBe(1);
    expect(await h.db.user.findUniqueOrThrow({ where: { id: ann.id } })).toMatchObject({ dataDeletionRequestedAt: null });
  });
});
