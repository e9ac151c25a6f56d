import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { NextRequest } from "next/server";
import { afterAll, beforeAll, expect, it } from "vitest";

// A local stand-in for the Inngest dev server's register endpoint (PUT /fn/register), which the SDK
// targets via INNGEST_DEV=<url>: it records the URL a sync registers.
let server: Server;
const registered: { url: string }[] = [];
const saved = { ...process.env };

beforeAll(async () => {
  server = createServer(async (req, res) => {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    if (req.url?.startsWith("/fn/register")) registered.push(JSON.parse(raw) as { url: string });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ok: true, modified: true }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  process.env.INNGEST_DEV = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.env.ENGRAM_PUBLIC_URL = "https://engram.example";
  delete process.env.INNGEST_SERVE_ORIGIN;
});
afterAll(async () => {
  process.env = saved;
  await new Promise((resolve) => server.close(resolve));
});

it("a sync registers ENGRAM_PUBLIC_URL, not the origin a request's Host header names", async () => {
  const { PUT } = await import("@/app/api/inngest/route.ts");
  const res = await PUT(new NextRequest("http://evil.example/api/inngest", { method: "PUT", headers: { host: "evil.example", "x-forwarded-host": "evil.example" } }), undefined);
  expect(res.status, await res.text()).toBeLessThan(300);
  expect(registered.map((r) => new URL(r.url).origin)).toEqual(["https://engram.example"]);
});
