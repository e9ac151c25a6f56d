import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backdateMemories } from "./support/backdate-memories.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { findPendingMemories } from "@/lib/processing/embedded-runner.ts";
import { claimMemory } from "@/lib/processing/process-memory.ts";

// No runner is started here: the sweeps below are the only ones reading the rows.
let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => h.close());

const retryBaseMs = 2_000;
const config = { maxAttempts: 5, retryBaseMs };

describe("the sweep's page of waiting memories", () => {
  it("holds only memories whose retry is due, so rows still waiting out a backoff never crowd out due ones", async () => {
    const now = new Date();
    const ids: string[] = [];
    for (const content of ["Backing off one.", "Backing off two.", "Due for its retry."]) ids.push((await ann.post("/v1/memories", { content })).body.data.id);
    const [waitingA, waitingB, due] = ids as [string, string, string];
    // Two failed attempts each: the third waits 2 × 2 s × 0.8 at least, so 3 s after the failure it is not due.
    for (const id of [waitingA, waitingB]) {
      await backdateMemories(h.db, id, { processingAttempts: 2, processingStartedAt: new Date(now.getTime() - 3_000), updatedAt: new Date(now.getTime() - 60_000) });
    }
    // One failed attempt, 10 s ago: due. Its row was written last, so it sorts after the other two.
    await backdateMemories(h.db, due, { processingAttempts: 1, processingStartedAt: new Date(now.getTime() - 10_000), updatedAt: new Date(now.getTime() - 30_000) });
    const staleBefore = new Date(now.getTime() - 300_000);
    for (const id of [waitingA, waitingB]) expect(await claimMemory(h.db, id, { ...config, now, staleBefore })).toBeNull();

    // A page of two (the sweep's is 200): before, it held the two rows that could not be claimed yet,
    // on every sweep, and the due row behind them was never reached.
    const page = await findPendingMemories(h.db, { staleBefore, retryBaseMs, limit: 2, now });
    expect(page).toContain(due);
    expect(page).not.toContain(waitingA);
    expect(page).not.toContain(waitingB);
    expect(await claimMemory(h.db, due, { ...config, now, staleBefore })).toMatchObject({ attempt: 2 });

    // Once their backoff has passed, they are on the page again.
    const later = new Date(now.getTime() + 5_000);
    expect(await findPendingMemories(h.db, { staleBefore, retryBaseMs, now: later })).toEqual(expect.arrayContaining([waitingA, waitingB]));
  });
});

describe("memories of a hub marked deleted", () => {
  it("are neither on the sweep's page nor claimed: the purge removes them, processing them would only spend the model", async () => {
    const hubId = await h.teamHub(ann);
    const id = (await ann.post("/v1/memories", { content: "Waiting in a hub about to go." }, { headers: { "x-hub-id": hubId } })).body.data.id;
    const now = new Date();
    const staleBefore = new Date(now.getTime() - 300_000);
    expect(await findPendingMemories(h.db, { staleBefore, retryBaseMs, now })).toContain(id);
    // Marked deleted, its memories not purged yet (a large hub, or a process stopped mid-purge).
    await h.db.hub.update({ where: { id: hubId }, data: { deletedAt: now } });
    expect(await findPendingMemories(h.db, { staleBefore, retryBaseMs, now })).not.toContain(id);
    expect(await claimMemory(h.db, id, { ...config, now, staleBefore })).toBeNull();
    expect(await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, processingAttempts: true } })).toEqual({ processingStatus: "pending", processingAttempts: 0 });
  });
});
