import { lookup as dnsLookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export interface FetchPolicy {
  maxRedirects: number;
  timeoutMs: number;
  maxBytes: number;
  /** Resolves a hostname to every address it has (tests pass a fake resolver). */
  resolve: (hostname: string) => Promise<ResolvedAddress[]>;
  /**
   * "address:port" pairs that may be fetched although the address is private.
   * Empty in production; tests add the loopback server they serve a page from.
   */
  allow: readonly string[];
}

export interface FetchedPage {
  /** The final URL after redirects. */
  url: string;
  status: number;
  contentType: string;
  body: Buffer;
}

/**
 * What failed: an address refused by policy, an HTTP status, a redirect past the limit, a page too
 * large, a host that does not resolve, the time limit, a connection refused, reset or unreachable
 * (or a name server failing for now), or something else.
 */
export type LinkFetchFailure = "refused" | "status" | "redirect" | "too_large" | "unresolved" | "timeout" | "unreachable" | "other";

/** The fetch was refused or failed; the message is safe to show to the memory's owner. */
export class LinkFetchError extends Error {
  constructor(
    message: string,
    readonly kind: LinkFetchFailure = "other",
    /** The HTTP status the page answered with, when that was the failure. */
    readonly status?: number,
  ) {
    super(message);
    this.name = "LinkFetchError";
  }

  /** Refused by policy (not a URL, not http(s), credentials, a private address) rather than failed. */
  get refused(): boolean {
    return this.kind === "refused";
  }

  /** Only a timeout, an unreachable server and a 5xx say the server is failing now rather than the page being gone or moved. */
  get failingNow(): boolean {
    return this.kind === "timeout" || this.kind === "unreachable" || (this.kind === "status" && this.status! >= 500);
  }
}

/** Socket and resolver errors of a server or network failing now, not of a page gone. */
const UNREACHABLE_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "EHOSTDOWN", "ENETUNREACH", "ENETDOWN", "EAI_AGAIN"]);

function unreachable(error: unknown): boolean {
  return UNREACHABLE_CODES.has(String((error as { code?: unknown } | null)?.code));
}

const defaultResolve = async (hostname: string): Promise<ResolvedAddress[]> =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));

export const DEFAULT_FETCH_POLICY: FetchPolicy = {
  maxRedirects: 5,
  timeoutMs: 10_000,
  maxBytes: 5 * 1024 * 1024,
  resolve: defaultResolve,
  allow: [],
};

const globalForPolicy = globalThis as unknown as { __engramLinkPolicy?: Partial<FetchPolicy> };

/**
 * Test-only: widen the policy (a fake resolver, a loopback server to read
 * from). Production code never calls this; undefined restores the defaults.
 */
export function setLinkFetchPolicyForTests(policy: Partial<FetchPolicy> | undefined): void {
  globalForPolicy.__engramLinkPolicy = policy;
}

export function currentFetchPolicy(): FetchPolicy {
  return { ...DEFAULT_FETCH_POLICY, ...globalForPolicy.__engramLinkPolicy };
}

const V4_BLOCKED: [string, number][] = [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
];

function v4ToInt(address: string): number {
  return address.split(".").reduce((n, part) => (n << 8) + Number(part), 0) >>> 0;
}

function v6Groups(address: string): number[] | null {
  let text = address.toLowerCase();
  const zone = text.indexOf("%");
  if (zone >= 0) text = text.slice(0, zone);
  // A trailing dotted quad (::ffff:1.2.3.4) becomes two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const n = v4ToInt(dotted[1]!);
    text = text.slice(0, dotted.index) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.split("::");
  const parse = (s: string | undefined) => (s ? s.split(":").map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  if (text.includes("::")) return [...left, ...Array(8 - left.length - right.length).fill(0), ...right];
  return left.length === 8 ? left : null;
}

/** Loopback, private, link-local, multicast, reserved — any address a server must not fetch for a user. */
export function isBlockedAddress(address: string): boolean {
  if (isIP(address) === 4) {
    const n = v4ToInt(address);
    return V4_BLOCKED.some(([base, bits]) => (n >>> (32 - bits)) === (v4ToInt(base) >>> (32 - bits)));
  }
  const g = v6Groups(address);
  if (!g || g.length !== 8 || g.some((x) => Number.isNaN(x))) return true;
  const zeroPrefix = (count: number) => g.slice(0, count).every((x) => x === 0);
  if (zeroPrefix(8)) return true; // ::
  if (zeroPrefix(7) && g[7] === 1) return true; // ::1
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d): judge the IPv4 address.
  if (zeroPrefix(5) && (g[5] === 0xffff || g[5] === 0)) return isBlockedAddress(`${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`);
  // IPv4-translated (::ffff:0:a.b.c.d, SIIT): a stateless translator on the server's network delivers it to the IPv4 address.
  if (zeroPrefix(4) && g[4] === 0xffff && g[5] === 0) return isBlockedAddress(`${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`);
  if (g[0] === 0x64 && g[1] === 0xff9b) return true; // NAT64 can reach IPv4 private space
  // 6to4 carries an IPv4 address in groups 1-2; a 6to4 gateway on the server's network delivers to it.
  if (g[0] === 0x2002) return isBlockedAddress(`${g[1]! >> 8}.${g[1]! & 255}.${g[2]! >> 8}.${g[2]! & 255}`);
  // Teredo carries its client's IPv4 address with every bit inverted in groups 6-7; a Teredo relay delivers to it.
  if (g[0] === 0x2001 && g[1] === 0) return isBlockedAddress(`${(~g[6]! >> 8) & 255}.${~g[6]! & 255}.${(~g[7]! >> 8) & 255}.${~g[7]! & 255}`);
  if ((g[0]! & 0xffc0) === 0xfec0) return true; // site-local: deprecated, still routed inside some networks
  if ((g[0]! & 0xfe00) === 0xfc00) return true; // unique local
  if ((g[0]! & 0xffc0) === 0xfe80) return true; // link-local
  if ((g[0]! & 0xff00) === 0xff00) return true; // multicast
  if (g[0] === 0x2001 && g[1] === 0x0db8) return true; // documentation
  if (g[0] === 0x0100 && g[1] === 0 && g[2] === 0 && g[3] === 0) return true; // discard-only
  return false;
}

/**
 * GET a URL on a user's behalf without reaching internal services: every hop
 * (the first URL and each redirect) is resolved first, every address it
 * resolves to must be public, and the connection is pinned to the checked
 * address so a second DNS answer cannot swap it. At most `maxRedirects`
 * redirects, `timeoutMs` overall and `maxBytes` of body. A `signal` that aborts (the job's lease
 * was lost) stops the fetch at once and rejects with its reason, not as a page that did not load.
 */
export async function safeFetch(rawUrl: string, policy: FetchPolicy = currentFetchPolicy(), { signal }: { signal?: AbortSignal } = {}): Promise<FetchedPage> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), policy.timeoutMs);
  const stop = () => controller.abort();
  if (signal?.aborted) stop();
  signal?.addEventListener("abort", stop, { once: true });
  try {
    let url = parseHttpUrl(rawUrl);
    for (let hop = 0; ; hop++) {
      const target = await checkTarget(url, policy, controller.signal);
      const response = await request(url, target, policy, controller.signal);
      if ([301, 302, 303, 307, 308].includes(response.status) && response.location) {
        if (hop >= policy.maxRedirects) throw new LinkFetchError(`Too many redirects (more than ${policy.maxRedirects})`, "redirect");
        url = parseHttpUrl(new URL(response.location, url).toString());
        continue;
      }
      if (response.status < 200 || response.status >= 300) throw new LinkFetchError(`The page answered HTTP ${response.status}`, "status", response.status);
      return { url: url.toString(), status: response.status, contentType: response.contentType, body: response.body! };
    }
  } catch (error) {
    if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error("the fetch was stopped");
    if (controller.signal.aborted) throw new LinkFetchError(`The page did not load within ${policy.timeoutMs / 1000} s`, "timeout");
    throw error;
  } finally {
    signal?.removeEventListener("abort", stop);
    clearTimeout(timer);
  }
}

function parseHttpUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new LinkFetchError("Not a valid URL", "refused");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new LinkFetchError(`Only http and https links are fetched, not ${url.protocol}`, "refused");
  if (url.username || url.password) throw new LinkFetchError("Links with credentials are not fetched", "refused");
  return url;
}

async function checkTarget(url: URL, policy: FetchPolicy, signal: AbortSignal): Promise<ResolvedAddress> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  const family = isIP(host);
  let addresses: ResolvedAddress[];
  if (family) addresses = [{ address: host, family: family as 4 | 6 }];
  else {
    try {
      // A name server that never answers must not hold the job past the time limit.
      addresses = await untilAborted(policy.resolve(host), signal);
    } catch (error) {
      if (signal.aborted) throw error;
      throw new LinkFetchError(`The host ${host} could not be resolved`, unreachable(error) ? "unreachable" : "unresolved");
    }
  }
  if (!addresses.length) throw new LinkFetchError(`The host ${host} could not be resolved`, "unresolved");
  // Every answer must be acceptable: otherwise a later connection could pick the private one.
  for (const { address } of addresses) {
    const allowed = policy.allow.includes(`${address}:${port}`) || policy.allow.includes(`[${address}]:${port}`);
    if (isBlockedAddress(address) && !allowed) {
      throw new LinkFetchError(
        family ? `Refused: ${host} is a private, loopback or link-local address` : `Refused: ${host} resolves to a private, loopback or link-local address`,
        "refused",
      );
    }
  }
  return addresses[0]!;
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

interface RawResponse {
  status: number;
  location?: string;
  contentType: string;
  body?: Buffer;
}

function request(url: URL, target: ResolvedAddress, policy: FetchPolicy, signal: AbortSignal): Promise<RawResponse> {
  // Connect to the address we checked, whatever DNS says now.
  const pinned = ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address: target.address, family: target.family }]);
    else callback(null, target.address, target.family);
  }) as unknown as LookupFunction;
  const transport = url.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = transport.request(
      url,
      {
        method: "GET",
        lookup: pinned,
        signal,
        headers: { "user-agent": "Engram link reader", accept: "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5" },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        const contentType = String(res.headers["content-type"] ?? "");
        if (status >= 300 && status < 400) {
          res.resume();
          resolve({ status, location: res.headers.location, contentType });
          return;
        }
        const declared = Number(res.headers["content-length"]);
        if (declared > policy.maxBytes) {
          res.destroy();
          reject(new LinkFetchError(`The page is larger than ${policy.maxBytes} bytes`, "too_large"));
          return;
        }
        const parts: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > policy.maxBytes) {
            res.destroy();
            reject(new LinkFetchError(`The page is larger than ${policy.maxBytes} bytes`, "too_large"));
            return;
          }
          parts.push(chunk);
        });
        res.on("end", () => resolve({ status, contentType, body: Buffer.concat(parts) }));
        res.on("error", (error) => reject(new LinkFetchError(`The page could not be read: ${error.message}`, unreachable(error) ? "unreachable" : "other")));
      },
    );
    req.on("error", (error) =>
      reject(error instanceof LinkFetchError ? error : new LinkFetchError(`The page could not be fetched: ${error.message}`, unreachable(error) ? "unreachable" : "other")),
    );
    req.end();
  });
}
