import { existsSync, readdirSync } from "node:fs";
import path from "node:path";

type Handler = (req: Request, ctx: { params: Promise<Record<string, string | string[]>> }) => Promise<Response>;

export interface RouteFile {
  /** e.g. /v1/memories/[id] */
  pattern: string;
  file: string;
  segments: string[];
}

const APP_DIR = path.join(process.cwd(), "app");

/** Every route.ts under app/v1, as Next's file router sees them. */
export function listRouteFiles(dir = path.join(APP_DIR, "v1")): RouteFile[] {
  const found: RouteFile[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...listRouteFiles(full));
    else if (entry.name === "route.ts") {
      const rel = path.relative(APP_DIR, path.dirname(full)).split(path.sep).filter((s) => !/^\(.*\)$/.test(s));
      found.push({ pattern: `/${rel.join("/")}`, file: full, segments: rel });
    }
  }
  return found;
}

function match(route: RouteFile, parts: string[]): Record<string, string | string[]> | null {
  const params: Record<string, string | string[]> = {};
  for (let i = 0; i < route.segments.length; i++) {
    const seg = route.segments[i]!;
    const optional = seg.match(/^\[\[\.\.\.(\w+)\]\]$/);
    if (optional) {
      params[optional[1]!] = parts.slice(i);
      return params;
    }
    const catchAll = seg.match(/^\[\.\.\.(\w+)\]$/);
    if (catchAll) {
      if (i >= parts.length) return null;
      params[catchAll[1]!] = parts.slice(i);
      return params;
    }
    const part = parts[i];
    if (part === undefined) return null;
    const dynamic = seg.match(/^\[(\w+)\]$/);
    if (dynamic) params[dynamic[1]!] = decodeURIComponent(part);
    else if (seg !== part) return null;
  }
  return route.segments.length === parts.length ? params : null;
}

/** Static segments beat dynamic ones, which beat catch-alls — Next's precedence. */
function rank(route: RouteFile): number[] {
  return route.segments.map((s) => (s.startsWith("[[...") ? 3 : s.startsWith("[...") ? 2 : s.startsWith("[") ? 1 : 0));
}

function compare(a: RouteFile, b: RouteFile): number {
  const ra = rank(a);
  const rb = rank(b);
  for (let i = 0; i < Math.max(ra.length, rb.length); i++) {
    const d = (ra[i] ?? -1) - (rb[i] ?? -1);
    if (d !== 0) return d;
  }
  return 0;
}

const routes = listRouteFiles().sort(compare);
const modules = new Map<string, Promise<Record<string, unknown>>>();

/** Dispatches a Request to the real route handler module, as Next would. */
export function dispatch(req: Request): Promise<Response> {
  return dispatchTo(routes, req);
}

/** Every route under these app directories (e.g. v1, mcp, oauth, .well-known), in Next's precedence. */
export function routerFor(dirs: string[]): (req: Request) => Promise<Response> {
  const table = dirs.filter((dir) => existsSync(path.join(APP_DIR, dir))).flatMap((dir) => listRouteFiles(path.join(APP_DIR, dir))).sort(compare);
  return (req) => dispatchTo(table, req);
}

async function dispatchTo(routes: RouteFile[], req: Request): Promise<Response> {
  const parts = new URL(req.url).pathname.split("/").filter(Boolean);
  for (const route of routes) {
    const params = match(route, parts);
    if (!params) continue;
    let mod = modules.get(route.file);
    if (!mod) {
      mod = import(route.file) as Promise<Record<string, unknown>>;
      modules.set(route.file, mod);
    }
    // Next answers HEAD with the GET handler (the request still says HEAD) when a route has no HEAD of its own.
    const handler = ((await mod)[req.method] ?? (req.method === "HEAD" ? (await mod).GET : undefined)) as Handler | undefined;
    if (!handler) return new Response(null, { status: 405 });
    const response = await handler(req, { params: Promise.resolve(params) });
    // Next sends a HEAD answered by GET without its body; a test must not read one production never sends.
    return req.method === "HEAD" ? new Response(null, { status: response.status, statusText: response.statusText, headers: response.headers }) : response;
  }
  return new Response("<html>404</html>", { status: 404, headers: { "content-type": "text/html" } });
}
