import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setLinkFetchPolicyForTests } from "@/lib/links/safe-fetch.ts";
import { EmbeddedRunner } from "@/lib/processing/embedded-runner.ts";
import { claimMemory, processMemory } from "@/lib/processing/process-memory.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

/**
 * A link's page was fetched without the job's abort signal: a job whose lease was lost (taken over by
 * another process, the memory deleted or rewritten) went on fetching a page that trickled until the
 * fetch's own 10 s limit, holding a worker for a result no one takes. The fetch now stops at once.
 */

let site: http.Server;
let port: number;
/** When each /trickle request's connection closed (ms since the epoch), in the order they came. */
const closedAt: (number | undefined)[] = [];
/** /held requests, unanswered until the test answers them. */
const held: http.ServerResponse[] = [];
let h: Harness;
let ann: Client;

beforeAll(async () => {
  site = http.createServer((req, res) => {
    if (req.url === "/held") return void held.push(res);
    if (req.url !== "/trickle") return void res.writeHead(404).end();
    const index = closedAt.push(undefined) - 1;
    res.writeHead(200, { "content-type": "text/plain" });
    const timer = setInterval(() => res.write("a"), 100);
    res.on("close", () => {
      clearInterval(timer);
      closedAt[index] = Date.now();
    });
  });
  await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve));
  port = (site.address() as AddressInfo).port;
  setLinkFetchPolicyForTests({ allow: [`127.0.0.1:${port}`] });
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  setLinkFetchPolicyForTests(undefined);
  await h?.close();
  site.closeAllConnections();
  await new Promise((resolve) => site.close(resolve));
});

async function until(what: string, check: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const row = (id: string) => h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, processingAttempts: true, extractedAt: true, extractionError: true } });

describe("a link's page fetch", () => {
  it("stops as soon as the job's lease is lost, and the memory is left to its new owner unread", async () => {
    const r = new EmbeddedRunner({ ...processingConfig(), leaseMs: 600, sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: false });
    try {
      const created = await ann.post("/v1/memories", { content: `http://127.0.0.1:${port}/trickle`, content_type: "link" });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const id = created.body.data.id as string;
      r.enqueue(id);
      await until("the page is being fetched", () => closedAt.length === 1, 10_000);
      // A takeover claims the row with attempts + 1 (job-lease.ts): the next renewal (every 200 ms) finds it gone.
      const taken = await row(id);
      await h.db.memory.updateMany({ where: { id }, data: { processingAttempts: taken.processingAttempts + 1, processingStartedAt: new Date() } });
      const takenAt = Date.now();
      await until("the fetch is closed", () => closedAt[0] !== undefined, 15_000);
      // Within a renewal, not at the fetch's 10 s limit.
      expect(closedAt[0]! - takenAt).toBeLessThan(5_000);
      await until("the job has ended", () => r.size.active === 0, 5_000);
      expect(r.stats.stale).toBe(1);
      // The page is the new owner's to read: nothing was recorded as read (or unreadable) by the job that lost it.
      expect(await row(id)).toMatchObject({ processingStatus: "running", extractedAt: null, extractionError: null });
    } finally {
      r.stop();
      await r.idle();
    }
  }, 30_000);

  it("a job that lost its lease without noticing yet (between renewals) does not write the page it read over its new owner's", async () => {
    const config = processingConfig();
    const created = await ann.post("/v1/memories", { content: `http://127.0.0.1:${port}/held`, content_type: "link" });
    const id = created.body.data.id as string;
    const claim = await claimMemory(h.db, id, { ...config, now: new Date(), staleBefore: new Date(0) });
    expect(claim?.attempt).toBe(1);
    // No signal: the lease's next renewal, which would notice the takeover, is up to a third of a lease away.
    const job = processMemory(h.db, claim!, config);
    await until("the page is being fetched", () => held.length === 1, 10_000);
    // Taken over (attempts + 1) by another process, which read the page and wrote its text.
    await h.db.memory.updateMany({ where: { id }, data: { processingAttempts: 2, processingStartedAt: new Date(), content: "The new owner's reading of the page.", extractedAt: new Date() } });
    held.shift()!.writeHead(200, { "content-type": "text/plain" }).end("An older reading of the page.");
    expect(await job).toEqual({ status: "stale" });
    const memory = await h.db.memory.findUniqueOrThrow({ where: { id }, select: { content: true, extractionError: true, processingAttempts: true } });
    expect(memory).toEqual({ content: "The new owner's reading of the page.", extractionError: null, processingAttempts: 2 });
  }, 30_000);
});
