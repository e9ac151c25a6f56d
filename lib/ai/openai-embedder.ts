import { createOpenAI } from "@ai-sdk/openai";
import { embedMany } from "ai";
import { EMBEDDING_DIMENSIONS, openAiModelName, type Embedder } from "./embedder.ts";
import { modelTimeoutMs } from "./model-timeout.ts";

/** Inputs per request: OpenAI accepts up to 2048; smaller requests retry cheaper. */
const REQUEST_BATCH = 256;

/**
 * OpenAI (or any OpenAI-compatible server at OPENAI_BASE_URL) embeddings,
 * shortened to 384 dimensions server-side so they fit the same pgvector column.
 */
export function createOpenAiEmbedder(): Embedder {
  const apiKey = process.env.OPENAI_API_KEY;
  if (!apiKey) throw new Error("OPENAI_API_KEY is not set");
  const provider = createOpenAI({ apiKey, baseURL: process.env.OPENAI_BASE_URL || undefined });
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
        for (const embedding of embeddings) {
          if (embedding.length !== EMBEDDING_DIMENSIONS) {
            throw new Error(`${modelName} returned ${embedding.length} dimensions, expected ${EMBEDDING_DIMENSIONS}`);
          }
          vectors.push(normalize(embedding));
        }
      }
      return vectors;
    },
  };
}

/** Compatible servers do not all return unit vectors; recall relies on them. */
function normalize(vector: number[]): number[] {
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0));
  return norm > 0 ? vector.map((x) => x / norm) : vector;
}
