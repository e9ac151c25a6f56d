import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { acceptsGzip, compressResponse } from "@/lib/api/compress-response.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { dispatch } from "./support/router.ts";

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  for (let i = 0; i < 12; i++) expect((await ann.post("/v1/memories", { content: `# Note ${i}\n\nThe gzip note number ${i} says the nightly backup runs at 02:00 UTC.` })).status).toBe(201);
});
afterAll(() => h.close());

const get = (path: string, headers: Record<string, string> = {}) =>
  dispatch(new Request(`http://localhost:3000${path}`, { headers: { authorization: `Bearer ${ann.key}`, ...headers } }));

describe("JSON responses are gzipped when the client accepts it", () => {
  it("a large body comes gzipped (level 1) and decodes to exactly the plain body", async () => {
    const plain = await get("/v1/memories?limit=12");
    expect(plain.headers.get("content-encoding")).toBeNull();
    const plainText = await plain.text();
    expect(plainText.length).toBeGreaterThan(1024);

    const zipped = await get("/v1/memories?limit=12", { "accept-encoding": "gzip, deflate, br" });
    expect(zipped.status).toBe(200);
    expect(zipped.headers.get("content-encoding")).toBe("gzip");
    expect(zipped.headers.get("vary")).toMatch(/accept-encoding/i);
    expect(zipped.headers.get("x-ratelimit-limit")).not.toBeNull();
    const bytes = Buffer.from(await zipped.arrayBuffer());
    expect(bytes.length).toBeLessThan(plainText.length / 2);
    expect(JSON.parse(gunzipSync(bytes).toString("utf8"))).toEqual(JSON.parse(plainText));
  });

  it("a small body (here an error envelope) and a refused gzip go plain", async () => {
    const missing = await get(`/v1/memories/${crypto.randomUUID()}`, { "accept-encoding": "gzip" });
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-encoding")).toBeNull();
    expect(missing.headers.get("vary")).toMatch(/accept-encoding/i);
    expect((await missing.json()).error.code).toBe("not_found");
    const refused = await get("/v1/memories?limit=12", { "accept-encoding": "gzip;q=0, identity" });
    expect(refused.headers.get("content-encoding")).toBeNull();
    expect((await refused.json()).data.memories).toHaveLength(12);
  });

  it("a body of megabytes is gzipped too (off the main thread); a download, even of JSON, is left to stream", async () => {
    const req = new Request("http://localhost/", { headers: { "accept-encoding": "gzip" } });
    const big = { data: { files: Array.from({ length: 400 }, (_, i) => ({ i, content: `line ${i} `.repeat(400) })) } };
    const zipped = await compressResponse(req, Response.json(big));
    expect(zipped.headers.get("content-encoding")).toBe("gzip");
    const bytes = Buffer.from(await zipped.arrayBuffer());
    const plain = gunzipSync(bytes);
    expect(plain.length).toBeGreaterThan(1024 * 1024);
    expect(JSON.parse(plain.toString("utf8"))).toEqual(big);

    const download = new Response(JSON.stringify(big), { headers: { "content-type": "application/json", "content-disposition": 'attachment; filename="notes.json"' } });
    expect(await compressResponse(req, download)).toBe(download);
  });

  it("reads Accept-Encoding as HTTP does", () => {
    expect(acceptsGzip(null)).toBe(false);
    expect(acceptsGzip("")).toBe(false);
    expect(acceptsGzip("gzip")).toBe(true);
    expect(acceptsGzip("br, GZIP;q=0.5")).toBe(true);
    expect(acceptsGzip("gzip;q=0")).toBe(false);
    expect(acceptsGzip("gzip;q=0.0, *")).toBe(false);
    expect(acceptsGzip("deflate, *")).toBe(true);
    expect(acceptsGzip("*;q=0")).toBe(false);
    expect(acceptsGzip("identity")).toBe(false);
  });
});
