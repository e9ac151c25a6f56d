import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEngram, type Engram } from "./support/engram.ts";

/**
 * Node refuses a request line and headers past 16 KiB before any route runs, and answered with a bare
 * status line: no body, no envelope. A 4,096-character cursor of non-ASCII characters is past it once
 * percent-encoded (found by `npm run fuzz`). scripts/server.mjs answers such requests, and requests
 * Node cannot parse, with the API's envelope.
 */
describe("requests Node refuses before any route runs", () => {
  let engram: Engram;
  beforeAll(async () => {
    engram = await startEngram();
  }, 120_000);
  afterAll(async () => {
    await engram?.stop();
  });

  const raw = (text: string) =>
    new Promise<string>((resolve, reject) => {
      const { hostname, port } = new URL(engram.url);
      const socket = connect(Number(port), hostname, () => socket.end(text));
      let answer = "";
      socket.on("data", (chunk: Buffer) => (answer += chunk.toString("utf8")));
      socket.on("close", () => resolve(answer));
      socket.on("error", reject);
    });

  it("a request line past 16 KiB gets 431 with the envelope", async () => {
    const res = await fetch(`${engram.url}/v1/dreams?cursor=${"%C3%A9".repeat(4096)}`);
    expect(res.status).toBe(431);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect((await res.json()).error.code).toBe("headers_too_large");
  });

  it("a request Node cannot parse gets 400 with the envelope", async () => {
    const answer = await raw("NOT A REQUEST\r\n\r\n");
    expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 400 Bad Request");
    expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)).error.code).toBe("invalid_request");
  });
});
