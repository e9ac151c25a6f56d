import { request, type IncomingHttpHeaders } from "node:http";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngram, type Engram, type EngramUser } from "./support/engram.ts";

/**
 * The built server compresses responses itself (scripts/server.mjs; Next's own compression is off):
 * a client that accepts gzip gets the same envelope compressed, one that does not gets it plain,
 * and the event stream is never compressed, so each event reaches the client when it happens.
 */
describe("the built server's response compression", () => {
  let engram: Engram;
  let ada: EngramUser;
  beforeAll(async () => {
    engram = await startEngram();
    ada = await engram.user("Ada");
    for (let i = 0; i < 6; i++) {
      const pushed = await ada.api("POST", "/v1/memories", { content: `# Runbook ${i}\n\nRestart the ingest worker ${i} with systemctl, then check its queue depth on the dashboard.` });
      expect(pushed.status).toBe(201);
    }
  }, 120_000);
  afterAll(async () => {
    await engram?.stop();
  });

  const get = (route: string, headers: Record<string, string>) =>
    new Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const { hostname, port } = new URL(engram.url);
      const req = request({ host: hostname, port, path: route, headers: { authorization: `Bearer ${ada.key}`, ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on("error", reject);
      req.end();
    });

  it("gzips a JSON envelope for a client that accepts it, and sends it plain otherwise", async () => {
    const zipped = await get("/v1/memories?limit=20", { "accept-encoding": "gzip" });
    expect(zipped.status).toBe(200);
    expect(zipped.headers["content-encoding"]).toBe("gzip");
    expect(zipped.headers.vary).toMatch(/accept-encoding/i);
    const unzipped = gunzipSync(zipped.body);
    expect(zipped.body.length).toBeLessThan(unzipped.length);

    const plain = await get("/v1/memories?limit=20", { "accept-encoding": "identity" });
    expect(plain.status).toBe(200);
    expect(plain.headers["content-encoding"]).toBeUndefined();
    const zippedList = JSON.parse(unzipped.toString("utf8"));
    const plainList = JSON.parse(plain.body.toString("utf8"));
    expect(zippedList.data.memories.map((m: { id: string }) => m.id)).toEqual(plainList.data.memories.map((m: { id: string }) => m.id));
    expect(zippedList.data.memories).toHaveLength(6);
  });

  it("sends the event stream uncompressed, each event as it happens", async () => {
    const controller = new AbortController();
    try {
      const { hostname, port } = new URL(engram.url);
      const received: string[] = [];
      const opened = new Promise<IncomingHttpHeaders>((resolve, reject) => {
        const req = request(
          { host: hostname, port, path: "/v1/events/stream", headers: { authorization: `Bearer ${ada.key}`, "accept-encoding": "gzip" }, signal: controller.signal },
          (res) => {
            res.on("data", (chunk: Buffer) => received.push(chunk.toString("utf8")));
            res.on("error", () => {});
            resolve(res.headers);
          },
        );
        req.on("error", (error) => (controller.signal.aborted ? undefined : reject(error)));
        req.end();
      });
      const headers = await opened;
      expect(headers["content-type"]).toMatch(/^text\/event-stream/);
      expect(headers["content-encoding"]).toBeUndefined();
      // The stream's first event, then one a push causes, arrive without the stream ending.
      const waitFor = async (pattern: RegExp) => {
        const deadline = Date.now() + 10_000;
        while (!pattern.test(received.join(""))) {
          if (Date.now() > deadline) throw new Error(`no ${pattern} on the stream; got: ${received.join("").slice(0, 500)}`);
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      };
      await waitFor(/event: ready/);
      const pushed = await ada.api("POST", "/v1/memories", { content: "# Pager\n\nThe on-call pager rotates every Monday at 09:00." });
      expect(pushed.status).toBe(201);
      await waitFor(new RegExp(`"entity_id":"${pushed.body.data.id}"`));
    } finally {
      controller.abort();
    }
  });
});
