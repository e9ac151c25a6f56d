import { promisify } from "node:util";
import { gzip, gzipSync } from "node:zlib";

/** Bodies smaller than this go as they are (the gzip header and a round trip cost more than they save). */
const MIN_BYTES = 1024;
/** Larger bodies (agent-session pages with content reach megabytes) are gzipped off the main thread. */
const SYNC_MAX_BYTES = 256 * 1024;
const gzipAsync = promisify(gzip);

/**
 * Gzips a JSON response here, at once and at level 1, when the client accepts gzip. Left to the
 * server, the same bodies went through Next's streaming gzip (level 6, chunk by chunk, callbacks
 * through the thread pool): under the mixed load of bench/load.mjs that was about 6 % of the server
 * process's time. Level 1 still shrinks JSON several times over; a response already encoded, an
 * event stream or a download (even of a JSON file) is passed on untouched, for Next to stream.
 */
export async function compressResponse(req: Request, response: Response): Promise<Response> {
  if (!response.body || response.headers.has("content-encoding") || response.headers.has("content-disposition")) return response;
  if (!response.headers.get("content-type")?.startsWith("application/json")) return response;
  if (!acceptsGzip(req.headers.get("accept-encoding"))) return response;
  const body = Buffer.from(await response.arrayBuffer());
  const headers = new Headers(response.headers);
  headers.append("Vary", "Accept-Encoding");
  const init = { status: response.status, statusText: response.statusText, headers };
  if (body.length < MIN_BYTES) return new Response(body, init);
  headers.set("Content-Encoding", "gzip");
  const zipped = body.length > SYNC_MAX_BYTES ? await gzipAsync(body, { level: 1 }) : gzipSync(body, { level: 1 });
  return new Response(zipped, init);
}

/** Whether an Accept-Encoding header allows gzip (named, or `*`, with a q above 0). */
export function acceptsGzip(header: string | null): boolean {
  if (!header) return false;
  let star: boolean | undefined;
  for (const part of header.split(",")) {
    const [name, ...params] = part.split(";").map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith("q="));
    const allowed = q === undefined || Number(q.slice(2)) > 0;
    if (name === "gzip" || name === "x-gzip") return allowed;
    if (name === "*") star = allowed;
  }
  return star ?? false;
}
