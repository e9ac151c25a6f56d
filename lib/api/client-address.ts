import { BlockList, isIP } from "node:net";

/**
 * The header our own server (scripts/server.mjs, what `npm start` runs) sets on every request to the
 * TCP peer's address, after dropping any value a client sent. Route handlers in Next cannot see the
 * socket, so this is how the address reaches them.
 */
export const SOCKET_ADDRESS_HEADER = "x-engram-socket-address";

interface Trust {
  /** TRUST_PROXY=1: the platform in front (e.g. Vercel) sets X-Forwarded-For itself. */
  all: boolean;
  /** ENGRAM_TRUSTED_PROXIES: addresses/CIDRs of our own proxies. */
  list: BlockList | undefined;
}

let cached: { key: string; trust: Trust } | undefined;

function trust(): Trust {
  const key = `${process.env.TRUST_PROXY ?? ""}|${process.env.ENGRAM_TRUSTED_PROXIES ?? ""}`;
  if (cached?.key === key) return cached.trust;
  const all = ["1", "true", "yes"].includes((process.env.TRUST_PROXY ?? "").trim().toLowerCase());
  let list: BlockList | undefined;
  for (const entry of (process.env.ENGRAM_TRUSTED_PROXIES ?? "").split(",").map((s) => s.trim()).filter(Boolean)) {
    list ??= new BlockList();
    const [address, bits] = entry.split("/");
    const family = isIP(address ?? "");
    if (!family) throw new Error(`ENGRAM_TRUSTED_PROXIES: "${entry}" is not an IP address or CIDR`);
    const type = family === 6 ? "ipv6" : "ipv4";
    if (bits === undefined) list.addAddress(address!, type);
    // Number("") is 0: "10.0.0.0/" would have trusted every address, and with it any client's X-Forwarded-For.
    else if (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 6 ? 128 : 32)) list.addSubnet(address!, Number(bits), type);
    else throw new Error(`ENGRAM_TRUSTED_PROXIES: "${entry}" has no valid prefix length`);
  }
  cached = { key, trust: { all, list } };
  return cached.trust;
}

/** "::ffff:10.0.0.1" → "10.0.0.1"; strips brackets and ports a proxy may add. */
function normalise(address: string | null | undefined): string | undefined {
  let a = address?.trim();
  if (!a) return undefined;
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(a);
  if (bracketed) a = bracketed[1]!;
  else if (/^\d+\.\d+\.\d+\.\d+:\d+$/.test(a)) a = a.slice(0, a.lastIndexOf(":"));
  if (a.toLowerCase().startsWith("::ffff:") && isIP(a.slice(7)) === 4) a = a.slice(7);
  return isIP(a) ? a : undefined;
}

function trusted(list: BlockList, address: string): boolean {
  return list.check(address, isIP(address) === 6 ? "ipv6" : "ipv4");
}

/**
 * An IPv6 client as its /64: one subscriber is handed a whole /64 (often a /56 or more) and may use
 * any address in it, so counting single addresses would give one client 2^64 separate budgets.
 */
function limitKey(address: string): string {
  if (isIP(address) !== 6) return address;
  let canonical: string;
  try {
    // The URL parser writes every form (a "::" anywhere, an IPv4 tail) as the same hex groups.
    canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return address; // a zone id (fe80::1%eth0): link-local, never from the internet
  }
  const [head = "", tail] = canonical.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
  return `${groups.slice(0, 4).join(":")}::/64`;
}

/**
 * The client's address for per-IP limits (an IPv6 one as its /64). Proxy headers are believed only when configured:
 * - TRUST_PROXY=1: the last X-Forwarded-For hop (what the platform's edge saw), else X-Real-IP;
 * - ENGRAM_TRUSTED_PROXIES: only when the socket peer is one of them, the right-most hop that is not;
 * - otherwise the socket address, whatever the headers say.
 */
export function clientAddress(req: Request): string {
  return knownClientAddress(req) ?? "unknown";
}

/**
 * The same, or undefined when the server cannot tell (`next start` without scripts/server.mjs, a
 * platform without TRUST_PROXY): a per-address cap that must not lump every such caller together
 * (OAuth client registration) is then skipped, leaving the global one.
 */
export function knownClientAddress(req: Request): string | undefined {
  const address = peerAddress(req);
  return address ? limitKey(address) : undefined;
}

function peerAddress(req: Request): string | undefined {
  const socket = normalise(req.headers.get(SOCKET_ADDRESS_HEADER));
  const { all, list } = trust();
  const hops = (req.headers.get("x-forwarded-for") ?? "").split(",").map(normalise).filter((a): a is string => !!a);
  if (all) return hops.at(-1) ?? normalise(req.headers.get("x-real-ip")) ?? socket;
  if (list && socket && trusted(list, socket)) {
    for (let i = hops.length - 1; i >= 0; i--) if (!trusted(list, hops[i]!)) return hops[i]!;
    return hops[0] ?? socket;
  }
  return socket;
}
