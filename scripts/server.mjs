// The production server `npm start` runs: Next's request handler behind a plain Node HTTP server, so
// that every request carries the TCP peer's address (route handlers cannot see the socket). Any
// client-sent copy of that header is replaced; X-Forwarded-For is left for lib/api/client-address.ts,
// which believes it only when TRUST_PROXY / ENGRAM_TRUSTED_PROXIES say so.
import { createServer } from "node:http";
import path from "node:path";
import next from "next";

const SOCKET_ADDRESS_HEADER = "x-engram-socket-address"; // lib/api/client-address.ts

const root = path.resolve(import.meta.dirname, "..");
const port = Number(process.env.PORT ?? 3000);
const hostname = process.env.HOSTNAME ?? "0.0.0.0";

const app = next({ dev: false, dir: root, hostname, port });
const handle = app.getRequestHandler();
await app.prepare();

const server = createServer((req, res) => {
  req.headers[SOCKET_ADDRESS_HEADER] = req.socket.remoteAddress ?? "";
  handle(req, res).catch((error) => {
    console.error("request failed", error);
    if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { code: "internal", message: "Internal error" } }));
  });
});
// Idle keep-alive connections stay open longer than clients and proxies keep them (Node's 5 s
// default races a client reusing a connection the moment the server closes it: ECONNRESET).
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.listen(port, hostname, () => console.log(`engram: listening on http://${hostname}:${port}`));
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    server.close();
    process.exit(0);
  });
}
