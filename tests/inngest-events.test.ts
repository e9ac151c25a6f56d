import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { backdateMemories } from "./support/backdate-memories.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";

// A local stand-in for the Inngest event API (POST /e/<event key>), which the SDK targets via INNGEST_DEV=<url>.
let server: Server;
const received: { path: string; events: { name: string; data: { id: string } }[] }[] = [];
let h: Harness;
let ann: Client;
const saved = { ...process.env };

beforeAll(async () => {
  server = createServer(async (req, res) => {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const body = raw ? JSON.parse(raw) : [];
    const events = Array.isArray(body) ? body : [body];
    received.push({ path: req.url ?? "", events });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ids: events.map((_: unknown, i: number) => `evt-${received.length}-${i}`), status: 200 }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  process.env.INNGEST_DEV = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  stopBackgroundProcessing();
  process.env = saved;
  await h.close();
  await new Promise((resolve) => server.close(resolve));
});

async function until(check: () => boolean) {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 25));
  expect(check()).toBe(true);
}

it("with Inngest configured, the sweep and every write send engram/memory.process; the function completes it", async () => {
  const before = (await ann.post("/v1/memories", { content: "Written before the server started its background work." })).body.data.id;
  // No process sent its event, a stale timeout ago: the sweep at start-up sends it (a memory written a
  // moment ago may have its event in Inngest's queue still, and waits for the stale timeout).
  await backdateMemories(h.db, before, { updatedAt: new Date(Date.now() - 3_600_000) });
  process.env.ENGRAM_PROCESSING_SWEEP_SECONDS = "1";
  await startBackgroundProcessing();
  await until(() => received.some((r) => r.events.some((e) => e.data.id === before)));

  const after = (await ann.post("/v1/memories", { content: "Written while Inngest handles processing." })).body.data.id;
  await until(() => received.some((r) => r.events.some((e) => e.data.id === after)));
  const all = received.flatMap((r) => r.events);
  expect(all.every((e) => e.name === "engram/memory.process")).toBe(true);
  expect(received.every((r) => r.path.startsWith("/e/"))).toBe(true);
  // No embedded runner in this mode: the memory waits for Inngest to call the function.
  expect((await ann.get(`/v1/memories/${after}`)).body.data.processing_status).toBe("pending");

  const { InngestTestEngine } = await import("@inngest/test");
  const { processMemoryFunction } = await import("@/inngest/functions.ts");
  const sent = all.find((e) => e.data.id === after)!;
  const { result } = await new InngestTestEngine({ function: processMemoryFunction, events: [sent] }).execute();
  expect(result).toEqual({ status: "done" });
  expect((await ann.get(`/v1/memories/${after}`)).body.data).toMatchObject({ processing_status: "done", summary: "Written while Inngest handles processing." });

  // Sweeps every second meanwhile: the waiting memory's event, in Inngest's queue now, is not sent again
  // (before, every sweep re-sent it, and each copy became a run of its own).
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  const sends = received.flatMap((r) => r.events).filter((e) => e.data.id === before);
  expect(sends).toHaveLength(1);
});
