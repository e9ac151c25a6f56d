import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { embeddingsInfo, getEmbedder, LOCAL_MODEL_ID, localModelDir, setEmbedder, settleEmbedderLoad } from "@/lib/ai/embedder.ts";
import { embedWorkerScript, localEmbedderThread } from "@/lib/ai/local-embedder-thread.ts";

const dot = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);

describe("local embedder (all-MiniLM-L6-v2, int8 ONNX, real model files)", () => {
  afterAll(() => setEmbedder(undefined));

  it("loads once per process and reports ready; a graceful stop can wait for the load (and never starts one)", async () => {
    expect(embeddingsInfo().status).toBe("not_loaded");
    await settleEmbedderLoad(60_000);
    expect(embeddingsInfo().status).toBe("not_loaded");
    const loading = getEmbedder();
    expect(embeddingsInfo().status).toBe("loading");
    await settleEmbedderLoad(60_000);
    expect(embeddingsInfo().status).toBe("ready");
    const [a, b] = await Promise.all([loading, getEmbedder()]);
    expect(a).not.toBeNull();
    expect(a).toBe(b);
    expect(a!.id).toBe("local:Xenova/all-MiniLM-L6-v2");
    expect(embeddingsInfo()).toEqual({ provider: "local", model: "Xenova/all-MiniLM-L6-v2", status: "ready" });
  });

  it("returns normalised 384-dimensional vectors in input order", async () => {
    const embedder = (await getEmbedder())!;
    const texts = ["a much longer sentence about database migrations and rollbacks", "short", ""];
    const vectors = await embedder.embed(texts);
    expect(vectors).toHaveLength(3);
    for (const v of vectors) {
      expect(v).toHaveLength(384);
      expect(dot(v, v)).toBeCloseTo(1, 4);
    }
    // Batching reorders by length internally; the result must still match each input.
    const [single] = await embedder.embed([texts[0]!]);
    expect(dot(single!, vectors[0]!)).toBeGreaterThan(0.99);
    expect(await embedder.embed([])).toEqual([]);
  });

  it("embeds a batch of mixed lengths in groups of similar length, each vector back at its text", async () => {
    const embedder = (await getEmbedder())!;
    const topics = ["kafka consumer lag", "the billing ledger", "rotating TLS certificates", "a pasta recipe", "the on-call rota", "quarterly hiring plans"];
    // From a few words to past the model's 256 word pieces, shuffled so grouping must reorder them.
    const texts = topics.flatMap((topic, i) => [1, 6, 30].map((n) => `Notes on ${topic}: ${Array.from({ length: n * (i + 1) }, (_, k) => `${topic.split(" ").at(-1)} detail ${k}`).join(", ")}.`));
    texts.sort((a, b) => (a.length * 7919) % 13 - (b.length * 7919) % 13);
    const batched = await embedder.embed(texts);
    const alone: number[][] = [];
    for (const text of texts) alone.push((await embedder.embed([text]))[0]!);
    texts.forEach((text, i) => {
      expect(dot(batched[i]!, alone[i]!), text.slice(0, 40)).toBeGreaterThan(0.97);
      for (let j = 0; j < texts.length; j++) if (j !== i && texts[j] !== text) expect(dot(batched[i]!, alone[j]!)).toBeLessThan(dot(batched[i]!, alone[i]!));
    });
  });

  it("groups texts so no model call pads more than a tenth of its word pieces, at most 8 texts a call", async () => {
    const { lengthGroups } = await import("@/lib/ai/embed-in-length-groups.mjs");
    const lengths = [256, 12, 180, 105, 256, 3, 240, 176, 250, 234, 14, 90, 256, 256, 256, 256, 256, 256, 256, 256, 256, 100, 101, 99];
    const groups = lengthGroups(lengths);
    expect(groups.flat().sort((a, b) => a - b)).toEqual(lengths.map((_, i) => i));
    for (const group of groups) {
      const sizes = group.map((i) => lengths[i]!);
      expect(group.length).toBeLessThanOrEqual(8);
      const sum = sizes.reduce((a, b) => a + b, 0);
      expect(Math.max(...sizes) * sizes.length).toBeLessThanOrEqual(sum * 1.1 + 1e-9);
    }
    // Similar lengths share calls: the eleven 256s take two, not one each.
    expect(groups.filter((group) => group.some((i) => lengths[i] === 256))).toHaveLength(2);
    expect(lengthGroups([])).toEqual([]);
  });

  it("tokenises each text once and pools by hand, bit for bit what transformers.js's own padding and pooling give", async () => {
    const { embedInLengthGroups, lengthGroups } = await import("@/lib/ai/embed-in-length-groups.mjs");
    const { env, pipeline, mean_pooling, Tensor } = await import("@huggingface/transformers");
    env.localModelPath = localModelDir();
    env.allowLocalModels = true;
    env.allowRemoteModels = false;
    const { tokenizer, model } = await pipeline("feature-extraction", LOCAL_MODEL_ID, { dtype: "q8", session_options: { intraOpNumThreads: 1 } });
    // Lengths from one word piece to past the 256 the model reads, so groups pad and truncate.
    const texts = [" ", "short", "how do I restart the worker?", "数据库迁移 rollback plan", ...[3, 12, 40, 41, 90, 200].map((n) => `Runbook: ${"check the queue depth, then page on-call. ".repeat(n)}`)];
    const ours = await embedInLengthGroups({ tokenizer, model, Tensor } as never, texts, 256);
    // The reference: the whole group through the tokenizer's padding, then transformers.js's pooling.
    const tokenize = tokenizer as unknown as (t: string | string[], o: object) => { input_ids: { dims: number[] }; attention_mask: unknown };
    const lengths = texts.map((text) => tokenize(text, { truncation: true, max_length: 256 }).input_ids.dims.at(-1)!);
    const groups = lengthGroups(lengths);
    expect(groups.some((group) => new Set(group.map((i) => lengths[i])).size > 1)).toBe(true);
    for (const group of groups) {
      const inputs = tokenize(group.map((i) => texts[i]!), { padding: true, truncation: true, max_length: 256 });
      const output = (await (model as unknown as (x: unknown) => Promise<{ last_hidden_state: never }>)(inputs)).last_hidden_state;
      const pooled = mean_pooling(output, inputs.attention_mask as never).normalize(2, -1);
      group.forEach((i, row) => expect(Array.from(ours[i]!), texts[i]!.slice(0, 30)).toEqual(Array.from((pooled.data as Float32Array).subarray(row * 384, (row + 1) * 384))));
    }
  });

  it("scores paraphrases above unrelated pairs", async () => {
    const embedder = (await getEmbedder())!;
    const pairs: [string, string, string][] = [
      ["How do I roll back a bad release?", "Steps to revert a broken deployment", "The cafeteria serves lasagne on Fridays"],
      ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."],
      ["The database is running out of disk space", "Postgres storage volume is almost full", "Our logo uses a teal colour"],
      ["food", "bread", "horse"],
    ];
    for (const [anchor, paraphrase, unrelated] of pairs) {
      const [a, p, u] = await embedder.embed([anchor, paraphrase, unrelated], "document");
      expect(dot(a!, p!), `${anchor} ~ ${paraphrase}`).toBeGreaterThan(dot(a!, u!) + 0.15);
    }
  });

  it("embeds queries on a thread of their own: a recall does not wait behind indexing", async () => {
    const embedder = (await getEmbedder())!;
    // Two batches' worth of long chunks for the indexing thread (seconds of model time)…
    const chunks = Array.from({ length: 64 }, (_, i) => `Runbook ${i}: ${"restart the worker, check the queue depth, then page the on-call engineer. ".repeat(16)}`);
    const started = performance.now();
    const documents = embedder.embed(chunks, "document").then((vectors) => ({ vectors, ms: performance.now() - started }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    // …and a question asked meanwhile. Behind them it waited for the running batch and then shared
    // its own with 31 more chunks: nearly all of the documents' time.
    const asked = performance.now();
    const [question] = await embedder.embed(["how do I restart the worker?"], "query");
    const queryMs = performance.now() - asked;
    const done = await documents;
    expect(done.vectors).toHaveLength(64);
    expect(queryMs).toBeLessThan(done.ms / 5);
    // Both threads run the same model: a text is the same vector whichever embeds it.
    const [again] = await embedder.embed(["how do I restart the worker?"], "document");
    expect(dot(question!, again!)).toBeGreaterThan(0.99);
  });

  it("runs the model in a worker thread; the main-thread fallback gives the same vectors", async () => {
    expect(embedWorkerScript()).toMatch(/local-embedder-worker\.mjs$/);
    const texts = ["rotate the staging database credentials", "如何回滚生产部署"];
    const threaded = await (await getEmbedder())!.embed(texts, "query");
    process.env.ENGRAM_EMBED_WORKER = "0";
    try {
      expect(embedWorkerScript()).toBeNull();
      setEmbedder(undefined);
      const inline = await (await getEmbedder())!.embed(texts, "query");
      texts.forEach((_, i) => expect(dot(threaded[i]!, inline[i]!)).toBeGreaterThan(0.999));
    } finally {
      delete process.env.ENGRAM_EMBED_WORKER;
      setEmbedder(undefined);
    }
  });

  it("is null with a clear reason when the model files are missing", async () => {
    const previous = process.env.ENGRAM_MODEL_DIR;
    process.env.ENGRAM_MODEL_DIR = "/nonexistent/engram-models";
    try {
      setEmbedder(undefined);
      expect(await getEmbedder()).toBeNull();
      const info = embeddingsInfo();
      expect(info.status).toBe("unavailable");
      // Health is public: the reason names the fix, never the server's paths.
      expect(info.reason).toBe("the local model files are not installed (npm run models)");
    } finally {
      if (previous === undefined) delete process.env.ENGRAM_MODEL_DIR;
      else process.env.ENGRAM_MODEL_DIR = previous;
      setEmbedder(undefined);
    }
  });
});

describe("the embedding worker thread (protocol, failures)", () => {
  const options = { modelId: "m", modelDir: "/nowhere", allowRemote: false, threads: 1, maxTokens: 8 };
  const script = (body: string) => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), "engram-worker-")), "worker.mjs");
    writeFileSync(file, `import { parentPort } from "node:worker_threads";\nimport { existsSync, writeFileSync } from "node:fs";\n${body}`);
    return file;
  };

  it("rejects with the worker's reason when the model cannot load", async () => {
    const file = script(`parentPort.postMessage({ ready: false, error: "no model here" });`);
    await expect(localEmbedderThread(file, options)).rejects.toThrow("no model here");
  });

  it("fails the batch of a worker that dies, then starts a new one for the next batch", async () => {
    // The first worker crashes on its first batch; the next one answers (a marker file tells them apart).
    const marker = path.join(mkdtempSync(path.join(tmpdir(), "engram-marker-")), "crashed");
    const file = script(`
      parentPort.postMessage({ ready: true });
      parentPort.on("message", ({ id, texts }) => {
        if (!existsSync(${JSON.stringify(marker)})) { writeFileSync(${JSON.stringify(marker)}, "1"); process.exit(3); }
        const data = new Float32Array(texts.length * 2).map((_, i) => i);
        parentPort.postMessage({ id, data, dims: 2 }, [data.buffer]);
      });`);
    const run = await localEmbedderThread(file, options);
    await expect(run(["a"])).rejects.toThrow(/exited/);
    expect(await run(["a", "b"])).toEqual([
      [0, 1],
      [2, 3],
    ]);
  });

  it("a worker that stops answering fails its batch after ENGRAM_MODEL_TIMEOUT_MS and is replaced for the next one", async () => {
    // The first worker spins forever on its first batch (it can never answer again); the next one answers.
    const marker = path.join(mkdtempSync(path.join(tmpdir(), "engram-marker-")), "hung");
    const file = script(`
      parentPort.postMessage({ ready: true });
      parentPort.on("message", ({ id, texts }) => {
        if (!existsSync(${JSON.stringify(marker)})) { writeFileSync(${JSON.stringify(marker)}, "1"); for (;;) {} }
        const data = new Float32Array(texts.length * 2).fill(1);
        parentPort.postMessage({ id, data, dims: 2 }, [data.buffer]);
      });`);
    const run = await localEmbedderThread(file, options);
    process.env.ENGRAM_MODEL_TIMEOUT_MS = "300";
    try {
      await expect(run(["a"])).rejects.toThrow(/did not answer/);
      expect(await run(["b"])).toEqual([[1, 1]]);
    } finally {
      delete process.env.ENGRAM_MODEL_TIMEOUT_MS;
    }
  }, 10_000);

  it("a time limit that cannot be read fails the batch with the reason, and the next batch still runs", async () => {
    const file = script(`
      parentPort.postMessage({ ready: true });
      parentPort.on("message", ({ id, texts }) => {
        const data = new Float32Array(texts.length * 2).fill(1);
        parentPort.postMessage({ id, data, dims: 2 }, [data.buffer]);
      });`);
    const run = await localEmbedderThread(file, options);
    process.env.ENGRAM_MODEL_TIMEOUT_MS = "soon";
    try {
      // Before, the lane threw after taking the task: the batch never settled (its jobs stayed `running`,
      // their leases renewed for good), every later batch queued behind it, and the throw went unhandled.
      const settled = await Promise.race([run(["a"]).then(() => "resolved", (error: Error) => error.message), new Promise((r) => setTimeout(() => r("hung"), 2_000))]);
      expect(settled).toBe('ENGRAM_MODEL_TIMEOUT_MS must be a positive integer, got "soon"');
    } finally {
      delete process.env.ENGRAM_MODEL_TIMEOUT_MS;
    }
    expect(await run(["b"])).toEqual([[1, 1]]);
  });
});

describe("EmbeddingBatcher (cross-call batching in front of the model)", () => {
  it("fills batches from every waiting caller, queries first, results back in order", async () => {
    const { EmbeddingBatcher } = await import("@/lib/ai/embedder.ts");
    const batches: string[][] = [];
    let release: () => void = () => {};
    const run = async (texts: string[]) => {
      batches.push(texts);
      if (batches.length === 1) await new Promise<void>((resolve) => (release = resolve));
      return texts.map((t) => [Number(t.split(":")[1])]);
    };
    const batcher = new EmbeddingBatcher(run, 4);
    const docs = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}:${i}`);
    const a = batcher.embed(docs("a", 3), "document");
    const b = batcher.embed(docs("bb", 3), "document");
    await new Promise((r) => setTimeout(r, 0));
    const q = batcher.embed(["q:7"], "query"); // arrives while the first batch runs
    release();
    expect(await a).toEqual([[0], [1], [2]]);
    expect(await b).toEqual([[0], [1], [2]]);
    expect(await q).toEqual([[7]]);
    expect(batches.map((batch) => batch.length)).toEqual([4, 3]);
    expect(batches[1]![0]).toBe("q:7"); // the query jumped ahead of the remaining documents
  });

  it("rejects only the callers whose batch failed", async () => {
    const { EmbeddingBatcher } = await import("@/lib/ai/embedder.ts");
    const batcher = new EmbeddingBatcher(async (texts) => {
      if (texts.includes("boom")) throw new Error("inference failed");
      return texts.map(() => [1]);
    }, 2);
    const bad = batcher.embed(["boom", "x"], "document");
    const good = batcher.embed(["y", "z"], "document");
    await expect(bad).rejects.toThrow("inference failed");
    expect(await good).toEqual([[1], [1]]);
  });

  it("a shared batch that fails is retried caller by caller: only the caller whose text the model cannot take fails", async () => {
    const { EmbeddingBatcher } = await import("@/lib/ai/embedder.ts");
    const calls: string[][] = [];
    const batcher = new EmbeddingBatcher(async (texts) => {
      calls.push(texts);
      if (texts.includes("poison")) throw new Error("inference failed");
      return texts.map(() => [1]);
    }, 8);
    // Three memories' chunks share one batch; one chunk is one the model fails on.
    const first = batcher.embed(["a", "b"], "document");
    const poisoned = batcher.embed(["c", "poison"], "document");
    const last = batcher.embed(["d"], "document");
    // Before, the batch's failure rejected all three: each memory lost an attempt for one text.
    await expect(poisoned).rejects.toThrow("inference failed");
    expect(await first).toEqual([[1], [1]]);
    expect(await last).toEqual([[1]]);
    expect(calls).toEqual([["a", "b", "c", "poison", "d"], ["a", "b"], ["c", "poison"], ["d"]]);
  });

  it("a model that fails every batch is not retried caller by caller beyond two tries", async () => {
    const { EmbeddingBatcher } = await import("@/lib/ai/embedder.ts");
    let calls = 0;
    const batcher = new EmbeddingBatcher(async () => {
      calls++;
      throw new Error("the embedding worker did not answer");
    }, 8);
    const requests = ["a", "b", "c", "d", "e"].map((text) => batcher.embed([text], "document"));
    for (const request of requests) await expect(request).rejects.toThrow("the embedding worker did not answer");
    // The shared batch, then two callers alone: both failing says the model is down, not a text.
    expect(calls).toBe(3);
  });
});

describe("a production server without the model files", () => {
  it("does not download an unverified model from the hub: the local model is unavailable until npm run models installs it", async () => {
    const saved = { env: process.env.NODE_ENV, dir: process.env.ENGRAM_MODEL_DIR };
    Object.assign(process.env, { NODE_ENV: "production", ENGRAM_MODEL_DIR: "/nonexistent/engram-models" });
    try {
      setEmbedder(undefined);
      // transformers.js would fetch onnx/model_quantized.onnx from the hub with no check of its sha256
      // (npm run models checks it against the published file's).
      expect(await getEmbedder()).toBeNull();
      expect(embeddingsInfo()).toMatchObject({ provider: "local", status: "unavailable", reason: "the local model files are not installed (npm run models)" });
    } finally {
      const env = process.env as Record<string, string | undefined>;
      for (const [name, value] of [["NODE_ENV", saved.env], ["ENGRAM_MODEL_DIR", saved.dir]] as const) {
        if (value === undefined) delete env[name];
        else env[name] = value;
      }
      setEmbedder(undefined);
    }
  }, 30_000);
});
