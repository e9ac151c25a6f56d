import { createHash, createHmac } from "node:crypto";
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { SignatureV4 } from "@smithy/signature-v4";

/**
 * An HTTP gate in front of s3rver that does for presigned URLs what real S3, R2 and MinIO do and
 * s3rver does not: it checks the SigV4 signature (so every signed header must be sent, as signed),
 * and honours `If-None-Match: *` on a PUT (412 when the object exists). Everything else, and every
 * request that passes, goes on to s3rver unchanged.
 */
export async function startS3PresignGate(upstreamPort: number, credentials: { accessKeyId: string; secretAccessKey: string }) {
  const server = createServer((req, res) => {
    handle(req, res).catch((error: Error) => {
      res.statusCode = 500;
      res.end(error.message);
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url!, `http://${req.headers.host}`);
    if (url.searchParams.has("X-Amz-Signature")) {
      if (!(await signatureMatches(req, url, credentials))) return refuse(res, 403, "SignatureDoesNotMatch");
      if (req.method === "PUT" && req.headers["if-none-match"] === "*" && (await exists(upstreamPort, url.pathname))) {
        return refuse(res, 412, "PreconditionFailed");
      }
    }
    const upstream = request({ host: "127.0.0.1", port: upstreamPort, method: req.method, path: req.url, headers: req.headers }, (reply) => {
      res.writeHead(reply.statusCode ?? 502, reply.headers);
      reply.pipe(res);
    });
    upstream.on("error", (error) => res.destroy(error));
    req.pipe(upstream);
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function refuse(res: ServerResponse, status: number, code: string) {
  res.writeHead(status, { "content-type": "application/xml" });
  res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code}</Message></Error>`);
}

function exists(port: number, pathname: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const head = request({ host: "127.0.0.1", port, method: "HEAD", path: pathname }, (reply) => {
      reply.resume();
      resolve(reply.statusCode === 200);
    });
    head.on("error", reject);
    head.end();
  });
}

class NodeSha256 {
  private readonly hash;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", typeof secret === "string" ? secret : Buffer.from(secret as ArrayBuffer));
  }
  update(data: string | ArrayBuffer | ArrayBufferView) {
    this.hash.update(typeof data === "string" ? data : Buffer.from(data as ArrayBuffer));
  }
  async digest() {
    return new Uint8Array(this.hash.digest());
  }
}

/** Re-signs the request as the presigner would have, from the headers it names, and compares. */
async function signatureMatches(req: IncomingMessage, url: URL, credentials: { accessKeyId: string; secretAccessKey: string }): Promise<boolean> {
  const params = url.searchParams;
  const [, date, region, service] = /^[^/]+\/(\d{8})\/([^/]+)\/([^/]+)\//.exec(params.get("X-Amz-Credential") ?? "") ?? [];
  const amzDate = params.get("X-Amz-Date") ?? "";
  if (!date || !region || !service || !amzDate.startsWith(date)) return false;
  const signed = (params.get("X-Amz-SignedHeaders") ?? "").split(";");
  const headers: Record<string, string> = {};
  for (const name of signed) {
    const value = req.headers[name];
    if (value === undefined) return false;
    headers[name] = Array.isArray(value) ? value.join(",") : value;
  }
  // Presigned S3 requests leave the body out of the signature.
  headers["X-Amz-Content-Sha256"] = params.get("X-Amz-Content-Sha256") ?? "";
  const query: Record<string, string> = {};
  for (const [name, value] of params) if (!name.startsWith("X-Amz-")) query[name] = value;
  const signer = new SignatureV4({ credentials, region, service, sha256: NodeSha256, uriEscapePath: false });
  const signingDate = new Date(`${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`);
  const presigned = await signer.presign(
    { method: req.method!, protocol: "http:", hostname: url.hostname, port: Number(url.port), path: url.pathname, query, headers },
    { signingDate, expiresIn: Number(params.get("X-Amz-Expires")), signableHeaders: new Set(signed) },
  );
  return presigned.query?.["X-Amz-Signature"] === params.get("X-Amz-Signature");
}
