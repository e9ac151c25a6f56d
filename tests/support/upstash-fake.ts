import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type Server } from "node:http";
import { connect, createServer as createNetServer, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { inject } from "vitest";

/**
 * A local stand-in for Upstash's REST API: a real redis-server (the one on the
 * PATH, or the PyPI wheel's that the global setup fetched; see scripts/redis-server.mjs) behind a small HTTP front that speaks Upstash's JSON protocol
 * (POST / with a command array, POST /pipeline with several, base64 results
 * when asked). Upstash is a paid service; this is only its wire format.
 */
export interface UpstashFake {
  url: string;
  token: string;
  commands: string[];
  stop(): Promise<void>;
}

type Reply = string | number | null | Reply[] | { error: string };

function encode(args: (string | number)[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join("")}`;
}

/** Parses one RESP reply from `buf` at `pos`; returns undefined when incomplete. */
function parse(buf: Buffer, pos: number): [Reply, number] | undefined {
  const end = buf.indexOf("\r\n", pos);
  if (end < 0) return undefined;
  const type = String.fromCharCode(buf[pos]!);
  const line = buf.toString("utf8", pos + 1, end);
  const next = end + 2;
  if (type === "+") return [line, next];
  if (type === "-") return [{ error: line }, next];
  if (type === ":") return [Number(line), next];
  if (type === "$") {
    const len = Number(line);
    if (len < 0) return [null, next];
    if (buf.length < next + len + 2) return undefined;
    return [buf.toString("utf8", next, next + len), next + len + 2];
  }
  if (type === "*") {
    const count = Number(line);
    if (count < 0) return [null, next];
    const items: Reply[] = [];
    let at = next;
    for (let i = 0; i < count; i++) {
      const item = parse(buf, at);
      if (!item) return undefined;
      items.push(item[0]);
      at = item[1];
    }
    return [items, at];
  }
  throw new Error(`unexpected RESP type ${type}`);
}

class RedisConnection {
  private buffer = Buffer.alloc(0);
  private waiting: ((reply: Reply) => void)[] = [];
  constructor(private readonly socket: Socket) {
    socket.on("data", (chunk) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      for (;;) {
        const parsed = parse(this.buffer, 0);
        if (!parsed) break;
        this.buffer = this.buffer.subarray(parsed[1]);
        this.waiting.shift()?.(parsed[0]);
      }
    });
  }
  send(args: (string | number)[]): Promise<Reply> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.socket.write(encode(args));
    });
  }
}

function toUpstash(reply: Reply, base64: boolean): unknown {
  if (Array.isArray(reply)) return reply.map((r) => toUpstash(r, base64));
  if (typeof reply === "string" && base64 && reply !== "OK") return Buffer.from(reply).toString("base64");
  return reply;
}

async function waitForPort(port: number, deadline: number): Promise<Socket> {
  for (;;) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const s = connect(port, "127.0.0.1", () => resolve(s));
        s.once("error", reject);
      });
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createNetServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

/**
 * A redis-server on a free port. Redis cannot be given port 0, so a random port below Linux's
 * ephemeral range (32768+, where the suite's own client connections live) is tried, and another
 * one when the server exits at once (the port was taken).
 */
async function startRedis(): Promise<{ redis: ChildProcess; socket: Socket }> {
  for (let attempt = 1; attempt <= 10; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (!(await portFree(port))) continue;
    const redis: ChildProcess = spawn(inject("redisServer"), ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
    });
    const failed = new Promise<"exited">((resolve, reject) => {
      redis.once("error", (e) => reject(new Error(`redis-server could not start: ${e.message}`)));
      redis.once("exit", () => resolve("exited"));
    });
    const result = await Promise.race([waitForPort(port, Date.now() + 10_000), failed]);
    if (result !== "exited") return { redis, socket: result };
  }
  throw new Error("redis-server found no free port in 10 tries");
}

export async function startUpstashFake(): Promise<UpstashFake> {
  const { redis, socket } = await startRedis();
  const conn = new RedisConnection(socket);
  const token = "fake-upstash-token";
  const commands: string[] = [];
  const http: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${token}`) return reply(401, { error: "Unauthorized" });
    const base64 = req.headers["upstash-encoding"] === "base64";
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as (string | number)[] | (string | number)[][];
    const run = async (command: (string | number)[]) => {
      const name = String(command[0]).toLowerCase();
      commands.push(name);
      // Upstash accepts a script flag that open-source Redis 7.0 rejects, and Redis 6 knows no
      // shebang line at all: drop it (evalsha then misses and the client sends eval).
      if (name === "eval" || (name === "script" && String(command[1]).toLowerCase() === "load")) {
        const at = name === "eval" ? 1 : 2;
        command = [...command];
        command[at] = String(command[at]).replace(/^#!lua[^\n]*\n/, "");
      }
      const result = await conn.send(command);
      return result && typeof result === "object" && !Array.isArray(result) ? result : { result: toUpstash(result, base64) };
    };
    if (req.url?.startsWith("/pipeline") || req.url?.startsWith("/multi-exec")) {
      const results = [];
      for (const command of body as (string | number)[][]) results.push(await run(command));
      return reply(200, results);
    }
    const result = await run(body as (string | number)[]);
    return "error" in result ? reply(400, result) : reply(200, result);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    commands,
    async stop() {
      await new Promise<void>((resolve) => http.close(() => resolve()));
      socket.destroy();
      redis.kill("SIGTERM");
    },
  };
}
