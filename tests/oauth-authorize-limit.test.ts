import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness } from "./support/harness.ts";
import { routerFor } from "./support/router.ts";

// The cap on unused metadata-document clients refuses at /oauth/authorize as it does at /oauth/token:
// 429 with Retry-After (the spec's rule for an exhausted limit), not a plain 400 page.

const dispatch = routerFor(["oauth"]);
// Picked by the system (port 0): a fixed one failed the run whenever something else held it.
let metadataPort = 0;
let h: Harness;
let metadataServer: Server;

beforeAll(async () => {
  h = await createHarness();
  process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA = "1";
  metadataServer = createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ client_id: `http://127.0.0.1:${metadataPort}${req.url}`, client_name: "Doc", redirect_uris: ["https://c.example/cb"] }));
  });
  await new Promise<void>((resolve) => metadataServer.listen(0, "127.0.0.1", resolve));
  metadataPort = (metadataServer.address() as AddressInfo).port;
});
afterAll(async () => {
  delete process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA;
  delete process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR;
  await new Promise<void>((resolve) => metadataServer?.close(() => resolve()));
  await h.close();
});

const authorize = (doc: string) => {
  const params = new URLSearchParams({ client_id: `http://127.0.0.1:${metadataPort}/${doc}`, redirect_uri: "https://c.example/cb", response_type: "code" });
  return dispatch(new Request(`http://engram.test/oauth/authorize?${params}`));
};

describe("GET /oauth/authorize past the metadata-document cap", () => {
  it("answers 429 with Retry-After", async () => {
    process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR = "1";
    const first = await authorize("first.json");
    expect(first.status).not.toBe(429);
    expect(await h.db.oAuthClient.count({ where: { kind: "metadata_document" } })).toBe(1);
    const refused = await authorize("second.json");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("content-type")).toContain("text/html");
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(3590);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    expect(await refused.text()).toContain("Too many");
  });
});
