import { createOpenAI } from "@ai-sdk/openai";
import { embedMany } from "ai";
import { EMBEDDING_DIMENSIONS, EmbedderUnavailable, openAiModelName, type Embedder } from "./embedder.ts";
import { modelTimeoutMs } from "./model-timeout.ts";

/** Inputs per request: OpenAI accepts up to 2048; smaller requests retry cheaper. */
const REQUEST_BATCH = 256;

/**
 * OpenAI (or any OpenAI-compatible server at OPENAI_BASE_URL) embeddings,
 * shortened to 384 dimensions server-side so they fit the same pgvector column.
 */
export function createOpenAiEmbedder(): Embedder {
  const apiKey = process.env.OPENAI_API_KEY;
  if (!apiKey) throw new EmbedderUnavailable("OPENAI_API_KEY is not set", "OPENAI_API_KEY is not set");
  const provider = createOpenAI({ apiKey, baseURL: process.env.OPENAI_BASE_URL || undefined, fetch: checkedFetch });
  const modelName = openAiModelName();
  const model = provider.embedding(modelName);
  return {
    id: `openai:${modelName}`,
    dimensions: EMBEDDING_DIMENSIONS,
    async embed(texts) {
      const vectors: number[][] = [];
      for (let start = 0; start < texts.length; start += REQUEST_BATCH) {
        const { embeddings } = await embedMany({
          model,
          values: texts.slice(start, start + REQUEST_BATCH).map((text) => text || " "),
          maxRetries: 2,
          abortSignal: AbortSignal.timeout(modelTimeoutMs()),
          providerOptions: { openai: { dimensions: EMBEDDING_DIMENSIONS } },
        });
        for (const embedding of embeddings) vectors.push(normalize(usableVector(embedding)));
      }
      return vectors;
    },
  };
}

/**
 * A vector recall can use, or an error processing_error shows as is. A zero vector has no direction (its
 * cosine distance to anything is NaN, so it matches nothing), and a wrong size or a non-number does not fit
 * the column: stored, the memory would look indexed while its vector leg never finds it.
 */
function usableVector(vector: readonly unknown[]): number[] {
  const unusable = (why: string) => new Error(`The embedding model returned an unusable vector (${why})`);
  if (vector.length !== EMBEDDING_DIMENSIONS) throw unusable(`${vector.length} dimensions, expected ${EMBEDDING_DIMENSIONS}`);
  if (!vector.every((x) => typeof x === "number" && Number.isFinite(x))) throw unusable("not a finite number");
  const numbers = vector as number[];
  if (numbers.every((x) => x === 0)) throw unusable("all zeros");
  return numbers;
}

/**
 * The SDK's schema refuses NaN (sent as null) and Infinity (1e999) with "Invalid JSON response", which says
 * nothing of the cause and is retried as if the reply was cut off: the vectors are checked here first.
 */
const checkedFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  if (!response.ok) return response;
  const text = await response.text();
  let body: { data?: { embedding?: unknown }[] } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // Not JSON: the SDK reports it.
  }
  for (const item of Array.isArray(body?.data) ? body.data : []) if (Array.isArray(item?.embedding)) usableVector(item.embedding);
  return new Response(text, { status: response.status, statusText: response.statusText, headers: response.headers });
};

/** Compatible servers do not all return unit vectors; recall relies on them. */
function normalize(vector: number[]): number[] {
  // Scaled first: squares of very large components overflow to Infinity.
  const scale = Math.max(...vector.map(Math.abs));
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + (x / scale) ** 2, 0));
  return vector.map((x) => x / scale / norm);
}
