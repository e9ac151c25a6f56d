import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setLinkFetchPolicyForTests } from "@/lib/links/safe-fetch.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { storageUsage } from "@/lib/quotas/storage-usage.ts";
import { createHarness, waitProcessed, type Harness } from "./support/harness.ts";

/**
 * The text read from a link is held to the storage quotas of the hub the memory is in when that text
 * is stored, which is not always the hub it was in when the page was requested.
 */
let h: Harness;
let site: http.Server;
let sitePort = 0;
let requested: () => void = () => {};
let release: () => void = () => {};

const page = `<!doctype html><html><head><title>Glaze notes</title></head><body><article><h1>Glaze notes</h1>
<p>${"Fire the test tiles before glazing a whole batch, and write down the cone you reached. ".repeat(40)}</p></article></body></html>`;

beforeAll(async () => {
  site = http.createServer((req, res) => {
    // Held until the test has moved the memory: the page arrives after the move.
    requested();
    new Promise<void>((resolve) => (release = resolve)).then(() => res.writeHead(200, { "content-type": "text/html" }).end(page));
  });
  sitePort = await new Promise<number>((resolve, reject) => {
    site.once("error", reject);
    site.listen(0, "127.0.0.1", () => resolve((site.address() as AddressInfo).port));
  });
  setLinkFetchPolicyForTests({ allow: [`127.0.0.1:${sitePort}`] });
  h = await createHarness();
  await startBackgroundProcessing();
});
afterAll(async () => {
  delete process.env.ENGRAM_QUOTA_HUB_BYTES;
  setLinkFetchPolicyForTests(undefined);
  stopBackgroundProcessing();
  await h?.close();
  site.closeAllConnections();
  await new Promise((r) => site.close(r));
});

describe("storage quotas on text read in", () => {
  it("holds a page's text to the quota of the hub its memory was moved to while the page was read", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    expect((await ann.post("/v1/memories", { content: "x".repeat(1500) }, { headers: { "x-hub-id": team } })).status).toBe(201);
    process.env.ENGRAM_QUOTA_HUB_BYTES = "2000";
    const fetched = new Promise<void>((resolve) => (requested = resolve));
    const link = await ann.post("/v1/memories", { content: `http://127.0.0.1:${sitePort}/glaze`, content_type: "link" });
    expect(link.status).toBe(201);
    await fetched;
    const moved = await ann.post("/v1/memories/batch-move", { ids: [link.body.data.id], hub_id: team });
    expect([moved.status, moved.body.data?.moved]).toEqual([200, 1]);
    release();
    const done = await waitProcessed(h.db, ann, link.body.data.id, 60_000);
    expect(done.processing_error).toMatch(/storage quota/);
    expect((await storageUsage(h.db, "hub", team)).bytes).toBeLessThanOrEqual(2000);
    expect(await storageUsage(h.db, "hub", ann.personalHubId)).toEqual({ bytes: 0, memories: 0 });
  });
});
