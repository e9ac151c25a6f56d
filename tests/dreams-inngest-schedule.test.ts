import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { InngestTestEngine } from "@inngest/test";
import { dreamScheduleFunction } from "@/inngest/dream-functions.ts";
import type { Db } from "@/lib/db/database.ts";
import { DreamRunner, dueHubs } from "@/lib/dreams/dream-runner.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// The Inngest schedule's sweep of runs waiting for a worker.

let h: Harness;
let owner: Client;
beforeAll(async () => {
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  await h?.close();
});

describe("the Inngest dream schedule with many runs waiting", () => {
  /**
   * The daily function queues a run for up to 1,000 due hubs, but sent events for the first 100 waiting
   * runs only (the in-process worker's sweep takes 100 a minute; this one runs once a day): the rest
   * stayed queued until the next day's, so an install with 1,000 due hubs had each dreamt every ten days.
   */
  it("sends every run it queued, past the first 100", async () => {
    const hubs = Array.from({ length: 150 }, (_, i) => ({ id: newId(), name: `Hub ${i}`, slug: `many-runs-${i}-${newId()}`, hubType: "team", ownerId: owner.id }));
    await h.db.hub.createMany({ data: hubs });
    await h.db.dreamRun.createMany({ data: hubs.map((hub) => ({ id: newId(), hubId: hub.id, triggeredBy: null, status: "queued" })) });
    // The platform's send (no Inngest here): the step answers as Inngest would.
    const { result } = await new InngestTestEngine({ function: dreamScheduleFunction, steps: [{ id: "run", handler: () => ({ ids: ["evt-1"] }) }] }).execute();
    expect(result).toEqual({ queued: 150 });
  }, 120_000);
});

describe("the Inngest dream schedule queuing a due hub", () => {
  /**
   * Queuing a run also sent its event from inside the step (kickDreamRun, one request to Inngest per
   * hub, up to 1,000 in one step), and the step's own sendEvent then sent it again: every scheduled run
   * started two function runs. The schedule's one batched sendEvent is now its only send.
   */
  it("sends each run's event once, through the step's sendEvent", async () => {
    const hubId = await h.teamHub(owner);
    expect((await owner.post("/v1/memories", { content: "A write makes the hub due for its daily dream." }, { headers: { "x-hub-id": hubId } })).status).toBe(201);
    const saved = process.env.INNGEST_DEV;
    process.env.INNGEST_DEV = "1";
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const { result } = await new InngestTestEngine({
        function: dreamScheduleFunction,
        steps: [{ id: "run", handler: () => ({ ids: ["evt-1"] }) }],
      }).execute();
      expect(result).toMatchObject({ queued: expect.any(Number) });
      // No send of its own from the step (here, to an Inngest that is not running: each one logged).
      expect(errors.mock.calls.map((call) => String(call[0])).filter((line) => line.includes("could not send run"))).toEqual([]);
    } finally {
      errors.mockRestore();
      if (saved === undefined) delete process.env.INNGEST_DEV;
      else process.env.INNGEST_DEV = saved;
    }
    const run = await h.db.dreamRun.findFirstOrThrow({ where: { hubId } });
    expect(run.status).toBe("queued");
  }, 120_000);
});

describe("the Inngest dream schedule with older runs waiting and many hubs due", () => {
  /**
   * The step queued up to 1,000 due hubs, then sent the first 1,000 waiting runs by age: its own new runs
   * came last, so with 400 older runs waiting only 600 of the 1,000 it queued got an event, and 400
   * hubs waited for the next day's schedule. The runs it queued are sent first, the waiting ones after.
   */
  it("sends every run it queued, before older waiting runs", async () => {
    const old = new Date(Date.now() - 2 * 86_400_000);
    const hub = (tag: string, i: number) => ({ id: newId(), name: `${tag} ${i}`, slug: `${tag}-${i}-${newId()}`, hubType: "team", ownerId: owner.id });
    const waiting = Array.from({ length: 400 }, (_, i) => hub("waiting", i));
    const due = Array.from({ length: 1000 }, (_, i) => hub("due", i));
    await h.db.hub.createMany({ data: [...waiting, ...due] });
    await h.db.dreamRun.createMany({ data: waiting.map((w) => ({ id: newId(), hubId: w.id, triggeredBy: null, status: "queued", createdAt: old })) });
    // Due without a write: their last run ran out of time, and the next continues it.
    await h.db.dreamRun.createMany({ data: due.map((d) => ({ id: newId(), hubId: d.id, triggeredBy: null, status: "partial_failed", createdAt: old, finishedAt: old })) });
    const { result, ctx } = await new InngestTestEngine({ function: dreamScheduleFunction, steps: [{ id: "run", handler: () => ({ ids: ["evt-1"] }) }] }).execute();
    expect(result).toEqual({ queued: 1000 });
    const sent = new Set((ctx.step.sendEvent.mock.calls[0]?.[1] as { data: { run_id: string } }[]).map((event) => event.data.run_id));
    const queued = await h.db.dreamRun.findMany({ where: { hubId: { in: due.map((d) => d.id) }, status: "queued" }, select: { id: true } });
    expect(queued).toHaveLength(1000);
    expect(queued.filter((run) => !sent.has(run.id))).toHaveLength(0);
  }, 300_000);
});

describe("the Inngest dream schedule's step retried after queuing some hubs", () => {
  /**
   * The step's own `queued` list put the runs it queued first; a retry after the first attempt had queued
   * some hubs (and failed) holds only those the retry queues itself. The first attempt's runs came back
   * among the waiting ones, oldest first, behind 400 older waiting runs: with 1,000 in all, 400 of the
   * hubs the schedule queued got no event that day. The hubs are picked in a step before (replayed as
   * memoized for the retry), and the runs of every hub picked come first now.
   */
  it("sends the runs its first attempt queued before older waiting runs", async () => {
    const tick = new Date(Date.now() - 10 * 60_000);
    const old = new Date(Date.now() - 2 * 86_400_000);
    const hub = (tag: string, i: number) => ({ id: newId(), name: `${tag} ${i}`, slug: `${tag}-${i}-${newId()}`, hubType: "team", ownerId: owner.id });
    const waiting = Array.from({ length: 400 }, (_, i) => hub("retry-waiting", i));
    const firstAttempt = Array.from({ length: 600 }, (_, i) => hub("retry-first", i));
    const due = Array.from({ length: 400 }, (_, i) => hub("retry-due", i));
    await h.db.hub.createMany({ data: [...waiting, ...firstAttempt, ...due] });
    await h.db.dreamRun.createMany({ data: waiting.map((w) => ({ id: newId(), hubId: w.id, triggeredBy: null, status: "queued", createdAt: old })) });
    // What the first attempt left: a run queued for each of 600 hubs, a second after the tick.
    const queuedFirst = new Date(tick.getTime() + 1000);
    await h.db.dreamRun.createMany({ data: firstAttempt.map((f) => ({ id: newId(), hubId: f.id, triggeredBy: null, status: "queued", createdAt: queuedFirst })) });
    await h.db.dreamRun.createMany({ data: due.map((d) => ({ id: newId(), hubId: d.id, triggeredBy: null, status: "partial_failed", createdAt: old, finishedAt: old })) });
    const { result, ctx } = await new InngestTestEngine({
      function: dreamScheduleFunction,
      events: [{ name: "inngest/scheduled.timer", data: { cron: "0 3 * * *" }, ts: tick.getTime() }],
      steps: [
        // What the pick step had memoized before the first attempt of the queuing step: its hubs and the rest.
        { id: "pick-due-hubs", handler: () => [...firstAttempt, ...due].map((x) => x.id) },
        { id: "run", handler: () => ({ ids: ["evt-1"] }) },
      ],
    }).execute();
    expect(result).toEqual({ queued: 1000 });
    const sent = new Set((ctx.step.sendEvent.mock.calls[0]?.[1] as { data: { run_id: string } }[]).map((event) => event.data.run_id));
    const scheduled = await h.db.dreamRun.findMany({ where: { hubId: { in: [...firstAttempt, ...due].map((x) => x.id) }, status: "queued" }, select: { id: true } });
    expect(scheduled).toHaveLength(1000);
    expect(scheduled.filter((run) => !sent.has(run.id))).toHaveLength(0);
  }, 300_000);
});

describe("the Inngest dream schedule's step retried, with Inngest's clock ahead of the server's", () => {
  /**
   * A retry told the runs its first attempt had queued from older waiting ones by the cron event's
   * timestamp (Inngest's clock, less a minute), compared with the runs' created_at (this server's): with
   * the clocks more than a minute apart, the first attempt's runs went behind every older waiting run.
   * The hubs the step queues are the ones the step before it picked (memoized for its retry), and their
   * runs, queued by this attempt or found queued by an earlier one, go first.
   */
  it("sends the runs of the hubs it picked first, whatever the event's timestamp", async () => {
    const old = new Date(Date.now() - 2 * 86_400_000);
    const hub = (tag: string, i: number) => ({ id: newId(), name: `${tag} ${i}`, slug: `${tag}-${i}-${newId()}`, hubType: "team", ownerId: owner.id });
    const waiting = Array.from({ length: 3 }, (_, i) => hub("skew-waiting", i));
    const firstAttempt = Array.from({ length: 3 }, (_, i) => hub("skew-first", i));
    const due = Array.from({ length: 2 }, (_, i) => hub("skew-due", i));
    await h.db.hub.createMany({ data: [...waiting, ...firstAttempt, ...due] });
    await h.db.dreamRun.createMany({ data: waiting.map((w) => ({ id: newId(), hubId: w.id, triggeredBy: null, status: "queued", createdAt: old })) });
    // What the first attempt left: a run queued for each of its hubs, now by this server's clock.
    await h.db.dreamRun.createMany({ data: firstAttempt.map((f) => ({ id: newId(), hubId: f.id, triggeredBy: null, status: "queued", createdAt: new Date() })) });
    await h.db.dreamRun.createMany({ data: due.map((d) => ({ id: newId(), hubId: d.id, triggeredBy: null, status: "partial_failed", createdAt: old, finishedAt: old })) });
    const { ctx } = await new InngestTestEngine({
      function: dreamScheduleFunction,
      // Inngest's clock, five minutes ahead of this server's.
      events: [{ name: "inngest/scheduled.timer", data: { cron: "0 3 * * *" }, ts: Date.now() + 5 * 60_000 }],
      steps: [
        { id: "pick-due-hubs", handler: () => [...firstAttempt, ...due].map((x) => x.id) },
        { id: "run", handler: () => ({ ids: ["evt-1"] }) },
      ],
    }).execute();
    const sent = (ctx.step.sendEvent.mock.calls[0]?.[1] as { data: { run_id: string; hub_id: string } }[]).map((event) => event.data.hub_id);
    expect(new Set(sent.slice(0, 5))).toEqual(new Set([...firstAttempt, ...due].map((x) => x.id)));
    expect(await h.db.dreamRun.count({ where: { hubId: { in: due.map((d) => d.id) }, status: "queued" } })).toBe(2);
  }, 120_000);
});

describe("the Inngest dream schedule's queuing step replaying hubs that changed since the pick", () => {
  /**
   * The pick step's hubs are memoized, and every attempt of the queuing step replays them: a hub picked,
   * then deleted and purged before the queuing, failed its run's insert on the foreign key, and every
   * retry replayed it and failed the same way (no event sent for any hub that day). A hub marked deleted,
   * whose dreams were switched off, or dreamt by a member's trigger since the pick got a run all the same.
   * The queuing step reads them again: only the hubs still due get a run.
   */
  it("queues the hubs still due, and none that is gone, deleted, switched off or dreamt since", async () => {
    const hub = (tag: string, extra: Record<string, unknown> = {}) => ({ id: newId(), name: tag, slug: `${tag}-${newId()}`, hubType: "team", ownerId: owner.id, ...extra });
    const purged = newId();
    const deleted = hub("picked-deleted", { deletedAt: new Date(), slug: `deleted:${newId()}` });
    const off = hub("picked-off", { settings: { dreams_enabled: false } });
    const dreamt = hub("picked-dreamt");
    const waiting = hub("picked-waiting");
    const due = hub("picked-due");
    await h.db.hub.createMany({ data: [deleted, off, dreamt, waiting, due] });
    const old = new Date(Date.now() - 2 * 86_400_000);
    // Dreamt by a member's trigger since the pick: the run is finished.
    const now = new Date();
    await h.db.dreamRun.create({ data: { id: newId(), hubId: dreamt.id, triggeredBy: owner.id, status: "completed", createdAt: now, finishedAt: now } });
    // Triggered since the pick and still waiting: its run is sent with the others, no second one queued.
    const member = await h.db.dreamRun.create({ data: { id: newId(), hubId: waiting.id, triggeredBy: owner.id, status: "queued", createdAt: now } });
    await h.db.dreamRun.create({ data: { id: newId(), hubId: due.id, triggeredBy: null, status: "partial_failed", createdAt: old, finishedAt: old } });
    const { result, error, ctx } = await new InngestTestEngine({
      function: dreamScheduleFunction,
      steps: [
        { id: "pick-due-hubs", handler: () => [purged, deleted.id, off.id, dreamt.id, waiting.id, due.id] },
        { id: "run", handler: () => ({ ids: ["evt-1"] }) },
      ],
    }).execute();
    expect(error).toBeUndefined();
    expect(result).toMatchObject({ queued: expect.any(Number) });
    const sent = (ctx.step.sendEvent.mock.calls[0]?.[1] as { data: { run_id: string; hub_id: string } }[]).map((event) => event.data);
    const queued = await h.db.dreamRun.findFirstOrThrow({ where: { hubId: due.id, status: "queued" } });
    expect(sent.slice(0, 2)).toEqual([
      { hub_id: waiting.id, run_id: member.id },
      { hub_id: due.id, run_id: queued.id },
    ]);
    expect(await h.db.dreamRun.count({ where: { hubId: { in: [deleted.id, off.id, dreamt.id, waiting.id] }, status: "queued" } })).toBe(1);
  }, 120_000);
});

describe("the in-process dream schedule with a hub purged as its run is queued", () => {
  /**
   * A hub purged between the schedule's pick and its run's insert fails that insert on the foreign key:
   * the hourly schedule stopped there, and every due hub after it waited for the next hour's. It skips
   * that hub, as the Inngest schedule does. The purge lands inside the insert itself (a trigger of the
   * test's, deleting the hub just before the row naming it is checked): the one moment between the pick
   * and the insert that no ordering of requests can reach on the test's single connection.
   */
  it("queues the other due hubs", async () => {
    const hubs: string[] = [];
    for (let i = 0; i < 3; i++) {
      const hubId = await h.teamHub(owner);
      expect((await owner.post("/v1/memories", { content: `A write makes hub ${i} due for its dream.` }, { headers: { "x-hub-id": hubId } })).status).toBe(201);
      hubs.push(hubId);
    }
    const due = (await dueHubs(h.db, new Date(), 24)).filter((id) => hubs.includes(id));
    expect(due).toHaveLength(3);
    const [purged, ...others] = due as [string, ...string[]];
    await h.db.$executeRawUnsafe(`
      CREATE FUNCTION test_purge_hub_on_run() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        DELETE FROM hubs WHERE id = NEW.hub_id;
        RETURN NEW;
      END $$`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER test_purge_hub_on_run BEFORE INSERT ON dream_runs FOR EACH ROW WHEN (NEW.hub_id = '${purged}'::uuid) EXECUTE FUNCTION test_purge_hub_on_run()`);
    try {
      await new DreamRunner({ db: async () => h.db as Db, schedule: false, exclusiveDatabase: true }).schedule();
    } finally {
      await h.db.$executeRawUnsafe("DROP TRIGGER test_purge_hub_on_run ON dream_runs");
      await h.db.$executeRawUnsafe("DROP FUNCTION test_purge_hub_on_run()");
    }
    // The purge is the trigger's, rolled back with the insert it failed: the hub is still there, runless.
    expect(await h.db.dreamRun.count({ where: { hubId: purged } })).toBe(0);
    for (const hubId of others) expect(await h.db.dreamRun.count({ where: { hubId, status: "queued" } }), hubId).toBe(1);
  }, 120_000);
});
