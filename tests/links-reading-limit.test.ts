import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setLinkFetchPolicyForTests } from "@/lib/links/safe-fetch.ts";
import { claimMemory, processMemory } from "@/lib/processing/process-memory.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

/**
 * A page stopped at a reading limit is recorded, not retried (docs/files.md): the memory keeps its URL
 * and says why. An HTML page was; a text, JSON or PDF page's reading was returned un-awaited from inside
 * readLink's try, so its ExtractionStoppedError escaped it and every attempt failed the same way.
 */

let site: http.Server;
let port: number;
let h: Harness;
let ann: Client;
const saved = process.env.ENGRAM_EXTRACT_TIMEOUT_MS;

beforeAll(async () => {
  const text = "The pottery studio's kiln log, one firing a line.\n".repeat(80_000);
  site = http.createServer((_req, res) => res.writeHead(200, { "content-type": "text/plain" }).end(text));
  await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve));
  port = (site.address() as AddressInfo).port;
  setLinkFetchPolicyForTests({ allow: [`127.0.0.1:${port}`] });
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  if (saved === undefined) delete process.env.ENGRAM_EXTRACT_TIMEOUT_MS;
  else process.env.ENGRAM_EXTRACT_TIMEOUT_MS = saved;
  setLinkFetchPolicyForTests(undefined);
  await h?.close();
  await new Promise((resolve) => site.close(resolve));
});

describe("a link whose page is stopped at a reading limit", () => {
  it("a text page over the time limit is recorded with the reason, not retried", async () => {
    const config = processingConfig();
    const id = (await ann.post("/v1/memories", { content: `http://127.0.0.1:${port}/log.txt`, content_type: "link" })).body.data.id as string;
    // No text of 3.9 MB is read in a millisecond.
    process.env.ENGRAM_EXTRACT_TIMEOUT_MS = "1";
    const claim = await claimMemory(h.db, id, { ...config, now: new Date(), staleBefore: new Date(0) });
    const outcome = await processMemory(h.db, claim!, config);
    delete process.env.ENGRAM_EXTRACT_TIMEOUT_MS;
    expect(outcome).toEqual({ status: "done" });
    const memory = await h.db.memory.findUniqueOrThrow({ where: { id }, select: { content: true, extractionError: true, processingAttempts: true } });
    expect(memory.content).toBe(`http://127.0.0.1:${port}/log.txt`);
    expect(memory.extractionError).toMatch(/^The page could not be read: it took longer than 0\.001 s to read and was stopped/);
    expect(memory.processingAttempts).toBe(1);
  }, 60_000);
});
