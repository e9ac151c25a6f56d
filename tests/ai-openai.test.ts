import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { embeddingsInfo, getEmbedder, setEmbedder } from "@/lib/ai/embedder.ts";
import { assertModelEndpoints } from "@/lib/ai/model-endpoints.ts";
import { backgroundRunner, startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";

/**
 * A local stand-in for the OpenAI HTTP API (embeddings and chat completions):
 * deterministic bag-of-words vectors, and structured replies for the chat
 * model. It records what it was sent so the tests can check the requests.
 */
interface FakeOpenAi {
  url: string;
  requests: { path: string; auth: string | undefined; body: any }[];
  failEmbeddings: boolean;
  stallEmbeddings: boolean;
  stallChat: boolean;
  /** Every embeddings request answered with this status and error message. */
  embeddingsError: { status: number; message: string } | null;
  /** Every embedding in the reply is this JSON text (a server's bad vector: zeros, 1e999, too short). */
  embeddingJson: ((dimensions: number) => string) | null;
  close(): Promise<void>;
}

function bagOfWords(text: string, dimensions: number): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  for (const word of text.toLowerCase().match(/[a-z]+/g) ?? []) {
    let hash = 0;
    for (const ch of word) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
    vector[hash % dimensions]! += 1;
  }
  return vector; // deliberately not normalised: the provider must normalise
}

async function readBody(req: IncomingMessage): Promise<any> {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  return raw ? JSON.parse(raw) : undefined;
}

async function startFakeOpenAi(): Promise<FakeOpenAi> {
  const fake = { requests: [], failEmbeddings: false, stallEmbeddings: false, stallChat: false, embeddingsError: null, embeddingJson: null } as unknown as FakeOpenAi;
  const stalled: import("node:http").ServerResponse[] = [];
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    fake.requests.push({ path: req.url ?? "", auth: req.headers.authorization, body });
    const reply = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(payload));
    };
    if (req.url === "/v1/embeddings") {
      // A provider that accepts the connection and never answers (ended when the fake closes).
      if (fake.stallEmbeddings) return void stalled.push(res);
      if (fake.embeddingsError) return reply(fake.embeddingsError.status, { error: { message: fake.embeddingsError.message, type: "invalid_request_error" } });
      // retry-after-ms: the SDK's own retries of a 503 then take milliseconds, not its default seconds.
      if (fake.failEmbeddings) return reply(503, { error: { message: "model overloaded for this key", type: "server_error" } }, { "retry-after-ms": "5" });
      const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
      if (fake.embeddingJson) {
        // Written by hand: JSON.stringify cannot produce what some servers send (1e999 parses as Infinity).
        const vector = fake.embeddingJson(body.dimensions ?? 1536);
        const data = inputs.map((_text, index) => `{"object":"embedding","index":${index},"embedding":${vector}}`).join(",");
        res.writeHead(200, { "content-type": "application/json" });
        return void res.end(`{"object":"list","model":"${body.model}","data":[${data}],"usage":{"prompt_tokens":1,"total_tokens":1}}`);
      }
      return reply(200, {
        object: "list",
        model: body.model,
        data: inputs.map((text, index) => ({ object: "embedding", index, embedding: bagOfWords(text, body.dimensions ?? 1536) })),
        usage: { prompt_tokens: 1, total_tokens: 1 },
      });
    }
    if (req.url === "/v1/chat/completions") {
      if (fake.stallChat) return void stalled.push(res);
      const name = body.response_format?.json_schema?.name;
      const content =
        name === "memory_classification"
          ? { kind: "rationale", stability: "stable" }
          : { summary: "Explains why the team moved session storage from Redis to Postgres." };
      return reply(200, {
        id: "chatcmpl-1",
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: JSON.stringify(content) }, finish_reason: "stop" }],
        usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
      });
    }
    reply(404, { error: { message: "not found" } });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () => {
    for (const res of stalled) res.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  };
  return fake;
}

let h: Harness;
let ann: Client;
let fake: FakeOpenAi;
const saved = { ...process.env };

beforeAll(async () => {
  fake = await startFakeOpenAi();
  Object.assign(process.env, {
    ENGRAM_EMBEDDINGS_PROVIDER: "openai",
    ENGRAM_EMBEDDING_MODEL: "text-embedding-3-small",
    OPENAI_API_KEY: "sk-test-key",
    OPENAI_BASE_URL: fake.url,
    ENGRAM_CHAT_MODEL: "gpt-test-mini",
    ENGRAM_PROCESSING_MAX_ATTEMPTS: "2",
    ENGRAM_PROCESSING_RETRY_BASE_MS: "50",
  });
  setEmbedder(undefined);
  h = await createHarness();
  ann = await h.user("Ann");
  await startBackgroundProcessing();
});

afterAll(async () => {
  stopBackgroundProcessing();
  process.env = saved;
  setEmbedder(undefined);
  await h.close();
  await fake.close();
});

const processed = (id: string) => waitProcessed(h.db, ann, id, 10_000);

const dot = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);

describe("OpenAI-compatible providers (local fake of the HTTP API)", () => {
  it("embeds through /v1/embeddings with 384 dimensions and normalises", async () => {
    const embedder = (await getEmbedder())!;
    expect(embedder.id).toBe("openai:text-embedding-3-small");
    const [a, b, c] = await embedder.embed(["rotate the deploy keys", "deploy keys rotate", "lunch menu on friday"], "query");
    for (const v of [a!, b!, c!]) {
      expect(v).toHaveLength(384);
      expect(dot(v, v)).toBeCloseTo(1, 6);
    }
    expect(dot(a!, b!)).toBeGreaterThan(dot(a!, c!));
    const request = fake.requests.find((r) => r.path === "/v1/embeddings")!;
    expect(request.auth).toBe("Bearer sk-test-key");
    expect(request.body).toMatchObject({ model: "text-embedding-3-small", dimensions: 384, input: ["rotate the deploy keys", "deploy keys rotate", "lunch menu on friday"] });
    expect(embeddingsInfo()).toEqual({ provider: "openai", model: "text-embedding-3-small", status: "ready" });
  });

  it("classifies and summarises with the configured chat model, embeds chunks with the provider", async () => {
    fake.requests.length = 0;
    const res = await ann.post("/v1/memories", { content: "Session storage moved from Redis to Postgres to drop one moving part." });
    const memory = await processed(res.body.data.id);
    expect(memory).toMatchObject({
      processing_status: "done",
      kind: "rationale",
      stability: "stable",
      summary: "Explains why the team moved session storage from Redis to Postgres.",
    });
    const chats = fake.requests.filter((r) => r.path === "/v1/chat/completions");
    expect(chats).toHaveLength(2);
    expect(chats[0]!.body.model).toBe("gpt-test-mini");
    expect(chats[0]!.body.response_format.type).toBe("json_schema");
    expect(JSON.stringify(chats[0]!.body.messages)).toContain("Session storage moved from Redis to Postgres");
    const [row] = await h.database.sql.query<{ dims: number }>(`SELECT vector_dims(embedding) AS dims FROM chunks WHERE memory_id = $1`, [memory.id]);
    expect(row!.dims).toBe(384);
  });

  it("embeds only chunk texts that have no vector yet: a new title calls no model, a one-section edit embeds that section, reembed all", async () => {
    const section = (name: string, word: string) =>
      `## ${name}\n\n${Array.from({ length: 14 }, (_, i) => `The ${word} step ${i} is checked by the ${name.toLowerCase()} owner.`).join(" ")}`;
    const content = [section("Backups", "snapshot"), section("Alerts", "pager"), section("Deploys", "rollout")].join("\n\n");
    const embedded = () => fake.requests.filter((r) => r.path === "/v1/embeddings").flatMap((r) => r.body.input as string[]);
    fake.requests.length = 0;
    const res = await ann.post("/v1/memories", { content });
    const first = await processed(res.body.data.id);
    const [{ chunks }] = (await h.database.sql.query<{ chunks: number }>(`SELECT count(*)::int AS chunks FROM chunks WHERE memory_id = $1`, [first.id])) as [{ chunks: number }];
    expect(chunks).toBe(3);
    expect(embedded()).toHaveLength(3);

    // A new title is written into the lexical entries by the PATCH itself: no embedding, no chat model.
    fake.requests.length = 0;
    expect((await ann.patch(`/v1/memories/${first.id}`, { title: "Platform runbook" })).body.data).toMatchObject({ processing_status: "done", title: "Platform runbook" });
    await backgroundRunner()!.idle();
    expect(fake.requests).toEqual([]);

    // One section edited: that section is embedded, the other two keep their vectors.
    fake.requests.length = 0;
    const edited = content.replace("The pager step 0 is", "The escalation step 0 is");
    expect((await ann.patch(`/v1/memories/${first.id}`, { content: edited })).body.data.version).toBe(2);
    await processed(first.id);
    expect(embedded()).toHaveLength(1);
    expect(embedded()[0]).toContain("The escalation step 0 is");
    const [{ n }] = (await h.database.sql.query<{ n: number }>(`SELECT count(embedding)::int AS n FROM chunks WHERE memory_id = $1`, [first.id])) as [{ n: number }];
    expect(n).toBe(3);

    // After a model change every vector is the old model's: reembed embeds them all again.
    fake.requests.length = 0;
    const { reembedMemories } = await import("@/lib/processing/reembed-memories.ts");
    await reembedMemories(h.db);
    expect(embedded().filter((text) => /snapshot|escalation|rollout/.test(text))).toHaveLength(3);
  });

  it("a stalled provider costs a recall its vector leg after ENGRAM_QUERY_EMBED_TIMEOUT_MS, never the request", async () => {
    const res = await ann.post("/v1/memories", { content: "The lighthouse keeper logs the fog horn tests every Sunday." });
    expect((await processed(res.body.data.id)).processing_status).toBe("done");
    fake.stallEmbeddings = true;
    process.env.ENGRAM_QUERY_EMBED_TIMEOUT_MS = "300";
    try {
      const started = performance.now();
      const recalled = await ann.post("/v1/recall", { query: "when are the fog horn tests logged by the lighthouse keeper" });
      expect(recalled.status).toBe(200);
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(recalled.body.data.memories.map((m: { id: string }) => m.id)).toContain(res.body.data.id);
    } finally {
      fake.stallEmbeddings = false;
      delete process.env.ENGRAM_QUERY_EMBED_TIMEOUT_MS;
    }
  });

  it("a provider that keeps failing: retried, then failed with the reason; still readable and lexically indexed", async () => {
    fake.failEmbeddings = true;
    try {
      const res = await ann.post("/v1/memories", { content: "Quarterly budget review notes for the platform team." });
      const memory = await processed(res.body.data.id);
      expect(memory.processing_status).toBe("failed");
      expect(memory.processing_error).toContain("model overloaded for this key");
      // The pipeline stopped before its summarise step; the local heuristic fills in.
      expect(memory.summary).toBe("Quarterly budget review notes for the platform team.");
      const row = await h.db.memory.findUniqueOrThrow({ where: { id: memory.id } });
      expect(row.processingAttempts).toBe(2);
      const chunks = await h.database.sql.query<{ has_vector: boolean; content: string }>(
        `SELECT embedding IS NOT NULL AS has_vector, content FROM chunks WHERE memory_id = $1`,
        [memory.id],
      );
      expect(chunks).toEqual([{ has_vector: false, content: "Quarterly budget review notes for the platform team." }]);
      expect(backgroundRunner()!.stats.retried).toBeGreaterThanOrEqual(1);
    } finally {
      fake.failEmbeddings = false;
    }
  });

  it("a provider that refuses the request (HTTP 400, 401, 403, 404, 422) fails the memory at once: a retry would be refused too", async () => {
    for (const status of [400, 401, 403, 404, 422]) {
      fake.embeddingsError = { status, message: `refused with ${status}` };
      try {
        const res = await ann.post("/v1/memories", { content: `The compost heap is turned every fortnight (${status}).` });
        const memory = await processed(res.body.data.id);
        expect(memory.processing_status, String(status)).toBe("failed");
        expect(memory.processing_error).toBe(`The model provider answered HTTP ${status}: refused with ${status}`);
        const row = await h.db.memory.findUniqueOrThrow({ where: { id: memory.id } });
        expect(row.processingAttempts, String(status)).toBe(1);
      } finally {
        fake.embeddingsError = null;
      }
    }
  });

  it("vectors a server returns all zeros, with Infinity or NaN, or of the wrong size are not stored: the attempt fails and says why", async () => {
    const bad: Record<string, (dimensions: number) => string> = {
      zeros: (d) => JSON.stringify(new Array<number>(d).fill(0)),
      infinity: (d) => `[1e999${",0.5".repeat(d - 1)}]`,
      nan: (d) => `[null${",0.5".repeat(d - 1)}]`,
      short: () => "[0.1,0.2,0.3]",
    };
    for (const [name, vector] of Object.entries(bad)) {
      fake.embeddingJson = vector;
      try {
        const res = await ann.post("/v1/memories", { content: `The allotment gate code changes monthly (${name}).` });
        const memory = await processed(res.body.data.id);
        expect(memory.processing_status, name).toBe("failed");
        expect(memory.processing_error, name).toMatch(/^The embedding model returned an unusable vector \((all zeros|not a finite number|\d+ dimensions, expected 384)\)$/);
        const chunks = await h.database.sql.query<{ has_vector: boolean }>(`SELECT embedding IS NOT NULL AS has_vector FROM chunks WHERE memory_id = $1`, [memory.id]);
        expect(chunks.length, name).toBeGreaterThan(0);
        expect(chunks.every((c) => !c.has_vector), name).toBe(true);
      } finally {
        fake.embeddingJson = null;
      }
    }
  });

  it("a provider that stops answering fails the attempt after ENGRAM_MODEL_TIMEOUT_MS: retried, then failed, never held running", async () => {
    process.env.ENGRAM_MODEL_TIMEOUT_MS = "300";
    try {
      for (const stall of ["stallChat", "stallEmbeddings"] as const) {
        fake[stall] = true;
        try {
          const res = await ann.post("/v1/memories", { content: `The ferry timetable changes in spring (${stall}).` });
          // Without a timeout the job waited forever, its lease renewed all the while: running for good.
          const memory = await processed(res.body.data.id);
          expect(memory.processing_status).toBe("failed");
          expect(memory.processing_error).toMatch(/time/i);
          const row = await h.db.memory.findUniqueOrThrow({ where: { id: memory.id } });
          expect(row.processingAttempts).toBe(2);
        } finally {
          fake[stall] = false;
        }
      }
    } finally {
      delete process.env.ENGRAM_MODEL_TIMEOUT_MS;
    }
  });

  it("processing_error, which every hub member reads, says what failed without the provider's echo of the key or the server's addresses", async () => {
    fake.embeddingsError = { status: 401, message: "Incorrect API key provided: sk-test-key. You can find your API key at https://platform.openai.com/account/api-keys." };
    try {
      const res = await ann.post("/v1/memories", { content: "The orchard is pruned in late winter." });
      const memory = await processed(res.body.data.id);
      expect(memory.processing_status).toBe("failed");
      expect(memory.processing_error).toContain("401");
      expect(memory.processing_error).toContain("Incorrect API key provided");
      expect(memory.processing_error).not.toContain("sk-test-key");
    } finally {
      fake.embeddingsError = null;
    }
    // A provider that cannot be reached: the error names the internal host and port it tried.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    process.env.OPENAI_BASE_URL = `http://127.0.0.1:${port}/v1`;
    setEmbedder(undefined);
    try {
      const res = await ann.post("/v1/memories", { content: "The greenhouse vents open above 24 degrees." });
      const memory = await processed(res.body.data.id);
      expect(memory.processing_status).toBe("failed");
      expect(memory.processing_error).toMatch(/could not be reached/);
      expect(memory.processing_error).not.toContain(String(port));
    } finally {
      process.env.OPENAI_BASE_URL = fake.url;
      setEmbedder(undefined);
    }
  });

  it("a base URL that is not an http(s) URL (OPENAI_BASE_URL, ENGRAM_RERANK_URL) stops start-up with its name, instead of failing every memory later", async () => {
    expect(() => assertModelEndpoints()).not.toThrow();
    // The usual slip: no scheme. Before, the provider loaded as ready and each call failed on its own.
    for (const [name, value] of [
      ["OPENAI_BASE_URL", "localhost:11434/v1"],
      ["OPENAI_BASE_URL", "ftp://models.internal/v1"],
      ["ENGRAM_RERANK_URL", "api.jina.ai/v1"],
    ] as const) {
      const before = process.env[name];
      process.env[name] = value;
      try {
        expect(() => assertModelEndpoints()).toThrow(`${name} must be an http:// or https:// URL, got "${value}"`);
      } finally {
        if (before === undefined) delete process.env[name];
        else process.env[name] = before;
      }
    }
  });
});
