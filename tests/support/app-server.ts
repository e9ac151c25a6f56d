import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { routerFor } from "./router.ts";

/** A Node request (its body read whole) as the Fetch API Request the route handlers take. */
export async function webRequest(req: IncomingMessage, origin: string, signal?: AbortSignal): Promise<Request> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, value);
  }
  const body = chunks.length && req.method !== "GET" && req.method !== "HEAD" ? Buffer.concat(chunks) : undefined;
  return new Request(`${origin}${req.url}`, { method: req.method, headers, body, signal });
}

/**
 * The real route handlers behind a real HTTP listener on 127.0.0.1, so HTTP clients (the MCP
 * SDK's client, OAuth flows) talk to Engram over the wire without a production build.
 */
export async function startAppServer(port = 0, dirs = ["v1", "mcp", "oauth", ".well-known"]): Promise<{ url: string; close(): Promise<void> }> {
  const dispatch = routerFor(dirs);
  // Port 0 (the default): a free port the system picks, so a run never fails on one something else holds.
  let origin = "";
  const server: Server = createServer(async (req, res) => {
    try {
      const response = await dispatch(await webRequest(req, origin));
      const out: Record<string, string | string[]> = {};
      response.headers.forEach((value, name) => {
        if (name === "set-cookie") return;
        out[name] = value;
      });
      const cookies = response.headers.getSetCookie();
      if (cookies.length) out["set-cookie"] = cookies;
      res.writeHead(response.status, out);
      res.end(Buffer.from(await response.arrayBuffer()));
    } catch (error) {
      console.error("app server", error);
      res.writeHead(500).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: origin,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
