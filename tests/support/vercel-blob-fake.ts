import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent, getGlobalDispatcher, setGlobalDispatcher, type Dispatcher } from "undici";

/**
 * A local fake of the Vercel Blob API (a paid outside service), enough for
 * Engram's adapter and for clients: `POST /signed-token`, presigned `PUT
 * /?pathname=` uploads, `GET ?url=` (head), `POST /delete`, and presigned
 * GETs of objects on `<store>.<access>.blob.vercel-storage.com`, which a
 * global fetch dispatcher routes here. Like the real service it checks the
 * read-write token, the delegation token's HMAC, the URL signature (the SDK's
 * canonical string), expiry, the pathname scope, the allowed content types,
 * the maximum size and overwrites.
 */
export interface VercelBlobFake {
  apiUrl: string;
  token: string;
  storeId: string;
  objects: Map<string, { bytes: Buffer; contentType: string; uploadedAt: Date }>;
  /** "METHOD path" of every request, for assertions. */
  requests: string[];
  close(): Promise<void>;
}

const CANONICAL_KEYS = [
  "vercel-blob-add-random-suffix",
  "vercel-blob-allow-overwrite",
  "vercel-blob-allowed-content-types",
  "vercel-blob-cache-control-max-age",
  "vercel-blob-callback-token-payload",
  "vercel-blob-callback-url",
  "vercel-blob-if-match",
  "vercel-blob-maximum-size-in-bytes",
  "vercel-blob-valid-until",
];

const hmac = (key: string, data: string) => createHmac("sha256", key).update(data).digest("base64url");

function same(a: string, b: string): boolean {
  const [x, y] = [Buffer.from(a), Buffer.from(b)];
  return x.length === y.length && timingSafeEqual(x, y);
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface Delegation {
  storeId: string;
  pathname: string;
  operations: string[];
  validUntil: number;
  maximumSizeInBytes?: number;
  allowedContentTypes?: string[];
}

export async function startVercelBlobFake(): Promise<VercelBlobFake> {
  const storeId = "engramtest";
  const secret = "fake-store-signing-secret";
  const token = `vercel_blob_rw_${storeId}_fakeReadWriteSecret`;
  const objects: VercelBlobFake["objects"] = new Map();
  const requests: string[] = [];
  const blobUrl = (pathname: string) => `https://${storeId}.private.blob.vercel-storage.com/${pathname}`;

  function bearer(req: IncomingMessage) {
    if (req.headers.authorization !== `Bearer ${token}`) throw new Refusal(403, "forbidden", "Access denied, please provide a valid token for this resource.");
  }

  /** A presigned URL: the delegation is ours and live, the signature covers this operation, pathname and parameters. */
  function verifyPresigned(url: URL, operation: string, pathname: string): Delegation {
    const delegationToken = url.searchParams.get("vercel-blob-delegation") ?? "";
    const signature = url.searchParams.get("vercel-blob-signature") ?? "";
    const [payloadSeg = "", mac = ""] = delegationToken.split(".");
    if (!same(mac, hmac(secret, payloadSeg))) throw new Refusal(403, "forbidden", "Invalid delegation token.");
    const delegation = JSON.parse(Buffer.from(payloadSeg, "base64url").toString("utf8")) as Delegation;
    const now = Date.now();
    if (delegation.storeId !== storeId || delegation.validUntil <= now) throw new Refusal(403, "forbidden", "Token expired");
    if (!delegation.operations.includes(operation)) throw new Refusal(403, "forbidden", `The delegation does not allow ${operation}.`);
    if (delegation.pathname !== "*" && delegation.pathname !== pathname) throw new Refusal(403, "forbidden", 'The "pathname" does not match the token payload.');
    const lines = [`operation=${operation}`, `pathname=${pathname}`];
    for (const key of CANONICAL_KEYS) {
      const value = url.searchParams.get(key);
      if (value) lines.push(`${key}=${value}`);
    }
    lines.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    if (!same(signature, hmac(hmac(secret, delegationToken), lines.join("\n")))) throw new Refusal(403, "forbidden", "Invalid signature.");
    const until = url.searchParams.get("vercel-blob-valid-until");
    if (until && Number(until) <= now) throw new Refusal(403, "forbidden", "Token expired");
    return delegation;
  }

  async function body(req: IncomingMessage): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const part of req) parts.push(part as Buffer);
    return Buffer.concat(parts);
  }

  function json(res: ServerResponse, status: number, value: unknown) {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(value));
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? "/", "http://fake");
    requests.push(`${req.method} ${url.pathname}`);
    // Objects on the blob host (routed here by the dispatcher below).
    const hosted = url.pathname.match(/^\/__blob\/([^/]+)\/(.+)$/);
    if (hosted) {
      const pathname = decodeURIComponent(hosted[2]!);
      if (hosted[1] !== `${storeId}.private.blob.vercel-storage.com`) throw new Refusal(404, "not_found", "No such store");
      verifyPresigned(url, req.method === "HEAD" ? "head" : "get", pathname);
      const object = objects.get(pathname);
      if (!object) throw new Refusal(404, "not_found", "The requested blob does not exist");
      const range = req.headers.range?.match(/^bytes=(\d+)-(\d+)$/);
      const [start, end] = range ? [Number(range[1]), Math.min(Number(range[2]), object.bytes.length - 1)] : [0, object.bytes.length - 1];
      const slice = object.bytes.subarray(start, end + 1);
      res.writeHead(range ? 206 : 200, {
        "content-type": object.contentType,
        "content-length": String(slice.length),
        ...(url.searchParams.get("download") === "1" && { "content-disposition": `attachment; filename="${pathname.split("/").pop()}"` }),
      });
      res.end(req.method === "HEAD" ? undefined : slice);
      return;
    }
    if (!/^\/api\/blob\/?/.test(url.pathname)) throw new Refusal(404, "not_found", "Unknown route");
    const route = url.pathname.replace(/^\/api\/blob\/?/, "");
    if (req.method === "POST" && route === "signed-token") {
      bearer(req);
      const input = JSON.parse((await body(req)).toString("utf8")) as Partial<Delegation>;
      const delegation: Delegation = {
        storeId,
        pathname: input.pathname ?? "*",
        operations: input.operations ?? ["get"],
        validUntil: input.validUntil ?? Date.now() + 3600_000,
        ...(input.maximumSizeInBytes !== undefined && { maximumSizeInBytes: input.maximumSizeInBytes }),
        ...(input.allowedContentTypes !== undefined && { allowedContentTypes: input.allowedContentTypes }),
      };
      const payloadSeg = Buffer.from(JSON.stringify(delegation)).toString("base64url");
      const delegationToken = `${payloadSeg}.${hmac(secret, payloadSeg)}`;
      return json(res, 200, { delegationToken, clientSigningToken: hmac(secret, delegationToken), validUntil: delegation.validUntil });
    }
    if (req.method === "PUT" && route === "") {
      const pathname = url.searchParams.get("pathname") ?? "";
      const delegation = verifyPresigned(url, "put", pathname);
      const contentType = String(req.headers["x-content-type"] ?? req.headers["content-type"] ?? "application/octet-stream");
      const allowed = [...(delegation.allowedContentTypes ?? []), ...(url.searchParams.get("vercel-blob-allowed-content-types")?.split(",") ?? [])];
      if (allowed.length && !allowed.includes(contentType)) throw new Refusal(400, "bad_request", `contentType ${contentType} is not allowed`);
      const bytes = await body(req);
      const max = Math.min(delegation.maximumSizeInBytes ?? Infinity, Number(url.searchParams.get("vercel-blob-maximum-size-in-bytes") ?? Infinity));
      if (bytes.length > max) throw new Refusal(400, "bad_request", `File is too large: the file length cannot be greater than ${max} bytes`);
      if (objects.has(pathname) && url.searchParams.get("vercel-blob-allow-overwrite") !== "true") throw new Refusal(400, "bad_request", "This blob already exists");
      objects.set(pathname, { bytes, contentType, uploadedAt: new Date() });
      return json(res, 200, { url: blobUrl(pathname), downloadUrl: `${blobUrl(pathname)}?download=1`, pathname, contentType, contentDisposition: `inline; filename="${pathname.split("/").pop()}"` });
    }
    if (req.method === "GET" && route === "" && url.searchParams.has("url")) {
      bearer(req);
      const ref = url.searchParams.get("url")!;
      const pathname = /^https?:\/\//.test(ref) ? new URL(ref).pathname.slice(1) : ref;
      const object = objects.get(pathname);
      if (!object) throw new Refusal(404, "not_found", "The requested blob does not exist");
      return json(res, 200, {
        url: blobUrl(pathname),
        downloadUrl: `${blobUrl(pathname)}?download=1`,
        pathname,
        size: object.bytes.length,
        contentType: object.contentType,
        contentDisposition: `inline; filename="${pathname.split("/").pop()}"`,
        cacheControl: "public, max-age=2592000",
        uploadedAt: object.uploadedAt.toISOString(),
        etag: `"${object.bytes.length}"`,
      });
    }
    if (req.method === "POST" && route === "delete") {
      bearer(req);
      const { urls } = JSON.parse((await body(req)).toString("utf8")) as { urls: string[] };
      for (const ref of urls) objects.delete(/^https?:\/\//.test(ref) ? new URL(ref).pathname.slice(1) : ref);
      return json(res, 200, {});
    }
    throw new Refusal(400, "bad_request", `Unsupported ${req.method} ${url.pathname}`);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (error instanceof Refusal) json(res, error.status, { error: { code: error.code, message: error.message } });
      else json(res, 400, { error: { code: "bad_request", message: String(error) } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // Requests for *.blob.vercel-storage.com (from Engram's reads and from the test's own fetches) come here.
  const previous = getGlobalDispatcher();
  const routed = new Agent().compose(
    (dispatch: Dispatcher["dispatch"]) =>
      (opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandlers): boolean => {
        const target = opts.origin ? new URL(String(opts.origin)) : undefined;
        if (target?.hostname.endsWith(".blob.vercel-storage.com")) {
          return dispatch({ ...opts, origin, path: `/__blob/${target.hostname}${opts.path}` }, handler);
        }
        return dispatch(opts, handler);
      },
  );
  setGlobalDispatcher(routed);

  return {
    apiUrl: `${origin}/api/blob`,
    token,
    storeId,
    objects,
    requests,
    async close() {
      setGlobalDispatcher(previous);
      await routed.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
