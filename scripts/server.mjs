// The production server `npm start` runs: Next's request handler behind a plain Node HTTP server, so
// that every request carries the TCP peer's address (route handlers cannot see the socket). Any
// client-sent copy of that header is replaced; X-Forwarded-For is left for lib/api/client-address.ts,
// which believes it only when TRUST_PROXY / ENGRAM_TRUSTED_PROXIES say so.
import { createServer } from "node:http";
import path from "node:path";
import next from "next";
// The compression middleware Next itself uses (next.config.ts turns Next's own off, see below).
import compression from "next/dist/compiled/compression/index.js";
import { releaseCompressionStream } from "next/dist/server/lib/release-compression-stream.js";

const SOCKET_ADDRESS_HEADER = "x-engram-socket-address"; // lib/api/client-address.ts

const root = path.resolve(import.meta.dirname, "..");
const port = Number(process.env.PORT ?? 3000);
const hostname = process.env.HOSTNAME ?? "0.0.0.0";

// Responses not finished yet: a graceful stop waits for them (event streams excepted).
const inFlight = new Set();
let stopping = false;
/** The HTTP server, once the app is prepared. */
let server;

// Graceful stop (a process manager's or a rolling deploy's SIGTERM, Ctrl-C): stop taking
// connections, let the requests in progress answer, then give background jobs what is left of the
// grace period and write what is batched in memory before closing the database
// (lib/system/stop-server.ts). Event streams are closed; their clients reconnect elsewhere.
// Installed before the app is prepared: a signal during start-up otherwise took the default action
// (killed, and `npm start` exited 1) instead of a clean stop.
const graceSeconds = Number(process.env.ENGRAM_SHUTDOWN_GRACE_SECONDS || 10);
const GRACE_MS = (Number.isFinite(graceSeconds) && graceSeconds >= 0 ? graceSeconds : 10) * 1000;
const isStream = (res) => res.headersSent && String(res.getHeader("content-type") ?? "").startsWith("text/event-stream");
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    // Still preparing the app: nothing listens yet, but preparing runs instrumentation's register(),
    // which opens the database (and migrates it) and starts background work. Exiting now could leave
    // the embedded database unclosed mid-way: the start finishes first, never listens, and then stops
    // the usual way (below the prepare), within the same last-resort limit.
    if (!server) {
      console.log(`engram: ${signal} while starting: stopping once the start has finished`);
      setTimeout(() => process.exit(1), GRACE_MS + 60_000).unref();
      return;
    }
    const deadline = Date.now() + GRACE_MS;
    // The last resort if something hangs (a statement that never returns); a start not finished yet
    // (register() still migrating, below) gets the same extra minute as a signal before listening.
    setTimeout(() => process.exit(1), GRACE_MS + (globalThis.__engramStopServer ? 10_000 : 60_000)).unref();
    console.log(`engram: ${signal}, stopping (requests in progress: ${[...inFlight].filter((res) => !isStream(res)).length})`);
    server.close();
    while ([...inFlight].some((res) => !isStream(res)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25));
    server.closeAllConnections();
    try {
      // Next listens before instrumentation's register() has finished: a start still opening or
      // migrating the database finishes first, then stops the usual way (exiting now left it mid-way).
      await globalThis.__engramStarting?.catch(() => {});
      // Set by instrumentation.ts once the app has started; a stop before register() ever ran has nothing to wind down.
      const stop = globalThis.__engramStopServer;
      if (!stop) {
        console.log("engram: stopped before the app had started");
        process.exit(0);
      }
      const { unfinishedJobs } = await stop({ graceMs: Math.max(0, deadline - Date.now()) });
      const left = unfinishedJobs ? `; ${unfinishedJobs} background job(s) left for the next start or another process` : "";
      console.log(`engram: stopped: counters written, database closed${left}`);
      process.exit(0);
    } catch (error) {
      console.error("engram: stopping failed", error);
      process.exit(1);
    }
  });
}

const app = next({ dev: false, dir: root, hostname, port });
const handle = app.getRequestHandler();
await app.prepare();
if (stopping) {
  // A signal came while the app was being prepared (above): stop without ever listening.
  try {
    await globalThis.__engramStarting?.catch(() => {});
    const stop = globalThis.__engramStopServer;
    if (stop) await stop({ graceMs: GRACE_MS });
    console.log("engram: stopped before listening");
    process.exit(0);
  } catch (error) {
    console.error("engram: stopping failed", error);
    process.exit(1);
  }
}

// Next's handlers know these methods only; any other (TRACE, CONNECT, PROPFIND, …) made Next answer a
// plain-text 500. They get the API's 405 envelope instead (found by `npm run fuzz`).
const KNOWN_METHODS = new Set(["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]);

// Responses are compressed here rather than by Next (next.config.ts: compress: false): Next's runs
// zlib at its default level 6, which took about 6% of the server's CPU under bench:load; level 1
// makes JSON envelopes nearly as small for a third of the work. Event streams stay uncompressed, so
// no event waits in a zlib buffer.
const compress = compression({
  level: 1,
  filter: (req, res) => !String(res.getHeader("content-type") ?? "").startsWith("text/event-stream") && compression.filter(req, res),
});

server = createServer((req, res) => {
  inFlight.add(res);
  res.once("close", () => inFlight.delete(res));
  // While stopping, a request on a kept-alive connection is answered, and the connection closed after it.
  if (stopping) res.setHeader("connection", "close");
  if (!KNOWN_METHODS.has(req.method ?? "")) {
    res.writeHead(405, { "content-type": "application/json", allow: [...KNOWN_METHODS].join(", "), "cache-control": "no-store" });
    res.end(JSON.stringify({ error: { code: "method_not_allowed", message: `${req.method} is not supported` } }));
    return;
  }
  req.headers[SOCKET_ADDRESS_HEADER] = req.socket.remoteAddress ?? "";
  compress(req, res, () => {});
  // A client gone mid-response leaves the middleware's zlib stream open: end it, as Next does.
  res.once("close", () => {
    if (!res.writableFinished) releaseCompressionStream(res);
  });
  handle(req, res).catch((error) => {
    console.error("request failed", error);
    if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { code: "internal", message: "Internal error" } }));
  });
});
// A request Node refuses before any handler runs (a request line and headers past its 16 KiB, a
// malformed request) got Node's bare status line with no body; it gets the API's envelope instead
// (found by `npm run fuzz`: a 4,096-character cursor of non-ASCII characters, percent-encoded, is
// past 16 KiB). The connection is closed after it, as Node does.
server.on("clientError", (error, socket) => {
  if (error.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const tooLarge = error.code === "HPE_HEADER_OVERFLOW";
  const status = tooLarge ? "431 Request Header Fields Too Large" : "400 Bad Request";
  const body = JSON.stringify({
    error: tooLarge
      ? { code: "headers_too_large", message: "The request line and headers are longer than the server accepts (16 KiB); send long values in a body" }
      : { code: "invalid_request", message: "The request could not be parsed", details: { issues: [{ path: "", message: "malformed HTTP request" }] } },
  });
  socket.end(`HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
});
// Idle keep-alive connections stay open longer than clients and proxies keep them (Node's 5 s
// default races a client reusing a connection the moment the server closes it: ECONNRESET).
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.listen(port, hostname, () => console.log(`engram: listening on http://${hostname}:${port}`));
