import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { inject } from "vitest";

const root = path.resolve(import.meta.dirname, "..", "..", "..");

export interface ApiResult<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface EngramUser {
  id: string;
  email: string;
  name: string;
  key: string;
  personalHubId: string;
  /** The API as this user (envelope included): state checks behind the clients' backs. */
  api(method: string, route: string, body?: unknown, headers?: Record<string, string>): Promise<ApiResult>;
}

export interface Engram {
  url: string;
  adminToken: string;
  /** Creates a user and a first API key through POST /v1/admin/users. */
  user(name: string): Promise<EngramUser>;
  /** The server's output so far (for failure messages). */
  log(): string;
  /** SIGTERM, as a process manager stops it; resolves with how it exited (SIGKILL after 10 s). */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface StartOptions {
  /** Serve this data directory (kept on stop) instead of a fresh one (removed on stop). */
  dataDir?: string;
  /** Use this admin token (a restart on the same data directory). */
  adminToken?: string;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.unref();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

/** A free port: from ENGRAM_COMPAT_PORTS ("3200-3299") when set, else one the OS picks. */
async function freePort(): Promise<number> {
  const range = process.env.ENGRAM_COMPAT_PORTS?.match(/^(\d+)-(\d+)$/);
  if (range) {
    const [low, high] = [Number(range[1]), Number(range[2])];
    const span = high - low + 1;
    const start = Math.floor(Math.random() * span);
    for (let i = 0; i < span; i++) {
      const port = low + ((start + i) % span);
      if (await portFree(port)) return port;
    }
    throw new Error(`no free port in ${process.env.ENGRAM_COMPAT_PORTS}`);
  }
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

async function request(url: string, method: string, headers: Record<string, string>, body?: unknown): Promise<ApiResult> {
  const res = await fetch(url, {
    method,
    headers: { ...(body !== undefined && { "content-type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

/**
 * Starts Engram's production build the way `npm start` does (scripts/start.mjs) on a fresh
 * embedded data directory and a free port, with an admin token for creating users.
 */
export async function startEngram(env: Record<string, string> = {}, options: StartOptions = {}): Promise<Engram> {
  const dataDir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), "engram-compat-"));
  const removeData = () => (options.dataDir ? undefined : rmSync(dataDir, { recursive: true, force: true }));
  const adminToken = options.adminToken ?? randomBytes(24).toString("base64url");
  let output = "";
  let server: ChildProcess | undefined;
  let url = "";

  for (let attempt = 0; attempt < 5 && !url; attempt++) {
    const port = await freePort();
    const childEnv: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: "production",
      PORT: String(port),
      HOSTNAME: "127.0.0.1",
      ENGRAM_DATA_DIR: dataDir,
      ENGRAM_ADMIN_TOKEN: adminToken,
      // A test file makes a few hundred calls a minute; the limits themselves are tested elsewhere.
      ENGRAM_RATE_LIMIT_REGULAR: "100000",
      ENGRAM_RATE_LIMIT_HEAVY: "100000",
      ENGRAM_RATE_LIMIT_LIGHT: "100000",
      NEXT_TELEMETRY_DISABLED: "1",
      ...env,
    };
    for (const name of ["DATABASE_URL", "UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "VITEST", "VITEST_WORKER_ID", "VITEST_POOL_ID"]) {
      if (!(name in env)) delete childEnv[name];
    }
    const child = spawn(process.execPath, [path.join(root, "scripts", "start.mjs")], { cwd: root, env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
    server = child;
    const append = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-200_000);
    };
    child.stdout!.on("data", append);
    child.stderr!.on("data", append);
    const candidate = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 150_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) break;
      try {
        const res = await fetch(`${candidate}/v1/health`);
        // Ours only once it says it listens: another test file's server that took the port between
        // the probe and this bind answers health too (and then refuses this one's admin token).
        if (res.ok && output.includes(`engram: listening on http://127.0.0.1:${port}`)) {
          url = candidate;
          break;
        }
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    if (!url) {
      child.kill("SIGTERM");
      await exited(child);
      // Another process took the port between the probe and the bind: try another one.
      if (!/EADDRINUSE/.test(output)) break;
    }
  }
  if (!url || !server) {
    removeData();
    throw new Error(`Engram did not start:\n${output.slice(-5000)}`);
  }
  const child = server;
  const base = url;

  return {
    url: base,
    adminToken,
    log: () => output,
    async user(name) {
      const email = `${name.toLowerCase().replace(/[^a-z0-9]+/g, ".")}.${randomBytes(3).toString("hex")}@example.test`;
      const res = await request(`${base}/v1/admin/users`, "POST", { authorization: `Bearer ${adminToken}` }, { email, name });
      if (res.status !== 201) throw new Error(`creating ${name} failed: ${res.status} ${JSON.stringify(res.body)}`);
      const data = res.body.data;
      const key: string = data.api_key;
      return {
        id: data.user.id,
        email,
        name,
        key,
        personalHubId: data.personal_hub_id,
        api: (method, route, body, headers = {}) => request(`${base}${route}`, method, { authorization: `Bearer ${key}`, ...headers }, body),
      };
    },
    async stop() {
      child.kill("SIGTERM");
      await exited(child);
      removeData();
      return { code: child.exitCode, signal: child.signalCode };
    },
  };
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
    }, 10_000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** The bearer key (MEMAX_API_KEY); omit to rely on HOME's stored credentials. */
  key?: string;
  /** Scratch HOME holding ~/.memax; a fresh one per call when omitted. */
  home?: string;
  cwd?: string;
  stdin?: string;
  /**
   * Answers typed in turn, each once its question is printed: Memax's prompts read stdin with a
   * fresh readline per question, so a piped `stdin` reaches only the first.
   */
  answers?: { when: RegExp; answer: string }[];
  env?: Record<string, string>;
  timeoutMs?: number;
  /** Sees the output as it comes (a command that waits for the browser prints where to go). */
  onStdout?: (soFar: string) => void;
}

export function scratchHome(): string {
  return mkdtempSync(path.join(tmpdir(), "memax-home-"));
}

/** Runs Memax's real CLI (`memax ARGS…`) against `engram`. */
export function memax(engram: Engram, args: string[], options: CliOptions = {}): Promise<CliResult> {
  const cli = inject("memaxCli");
  const home = options.home ?? scratchHome();
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: home,
    USERPROFILE: home,
    XDG_CONFIG_HOME: path.join(home, ".config"),
    TZ: process.env.TZ ?? "UTC",
    MEMAX_API_URL: engram.url,
    NO_COLOR: "1",
    FORCE_COLOR: "0",
    ...(options.key !== undefined && { MEMAX_API_KEY: options.key }),
    ...options.env,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: options.cwd ?? home, env: env as NodeJS.ProcessEnv, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const answers = [...(options.answers ?? [])];
    let asked = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
      options.onStdout?.(stdout);
      const next = answers[0];
      if (next && next.when.test(stdout.slice(asked))) {
        answers.shift();
        asked = stdout.length;
        if (answers.length) child.stdin.write(`${next.answer}\n`);
        else child.stdin.end(`${next.answer}\n`);
      }
    });
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`memax ${args.join(" ")} timed out\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.once("error", reject);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
    if (!options.answers?.length) child.stdin.end(options.stdin ?? "");
  });
}

/** Memax's SDK as built from its sources (the `memax-sdk` package's dist). */
export async function loadSdk(): Promise<{ Memax: new (config: Record<string, unknown>) => any; MemaxError: new (...args: any[]) => Error }> {
  return import(/* @vite-ignore */ inject("memaxSdk"));
}

/** Waits until `check` returns a value (polls without side effects of its own). */
export async function eventually<T>(check: () => Promise<T | undefined | null | false>, timeoutMs = 60_000, what = "condition"): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Pushes each content to the user's personal hub and waits until background processing has
 * chunked and embedded them all. Polls the list (list reads do not count as accesses).
 */
export async function pushProcessed(user: EngramUser, contents: string[], timeoutMs = 120_000): Promise<string[]> {
  const ids: string[] = [];
  for (const content of contents) ids.push((await user.api("POST", "/v1/memories", { content })).body.data.id);
  await eventually(async () => {
    const list = await user.api("GET", `/v1/memories?hub_id=${user.personalHubId}&limit=100`);
    const done = new Set(list.body.data.memories.filter((m: any) => m.processing_status === "done").map((m: any) => m.id));
    return ids.every((id) => done.has(id));
  }, timeoutMs, "memories processed");
  return ids;
}
