// One Engram server process for tests/multi-process*.test.ts (not a test itself): what `npm start` does at
// start-up (open and migrate the database, maintenance, background processing) in front of the real
// route handlers on 127.0.0.1:$PORT, without needing a production build. Run with `node --import tsx`.
// Responses are streamed (the event stream stays open), unlike tests/support/app-server.ts.
import { createServer } from "node:http";
import { Readable } from "node:stream";
import { startBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { startServer } from "@/lib/system/start-server.ts";
import { webRequest } from "./app-server.ts";
import { dispatch } from "./router.ts";

const port = Number(process.env.PORT);
await startServer();
await startBackgroundProcessing();

const server = createServer(async (req, res) => {
  try {
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    const response = await dispatch(await webRequest(req, `http://127.0.0.1:${port}`, abort.signal));
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) return void res.end();
    Readable.fromWeb(response.body as import("node:stream/web").ReadableStream).on("error", () => res.destroy()).pipe(res);
  } catch (error) {
    console.error("multi-process server", error);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
});
await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
console.log(JSON.stringify({ ready: `http://127.0.0.1:${port}`, pid: process.pid }));
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(0));
