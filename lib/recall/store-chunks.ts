import type { DbClient } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";

export interface ChunkInput {
  position: number;
  content: string;
  headingChain: string;
  tokenCount: number;
  /** 384 numbers, or null when no embedding model is available (lexical-only). */
  embedding: number[] | null;
}

/**
 * Replaces a memory's chunks with their lexical and vector index entries.
 * The only writer of chunks.search_vector and chunks.embedding.
 */
export async function replaceChunks(tx: DbClient, memory: { id: string; hubId: string }, chunks: ChunkInput[]): Promise<void> {
  await tx.$executeRaw`DELETE FROM chunks WHERE memory_id = ${memory.id}::uuid`;
  for (const chunk of chunks) {
    const embedding = chunk.embedding ? `[${chunk.embedding.join(",")}]` : null;
    await tx.$executeRaw`
      INSERT INTO chunks (id, memory_id, hub_id, position, content, heading_chain, token_count, search_vector, embedding)
      VALUES (${newId()}::uuid, ${memory.id}::uuid, ${memory.hubId}::uuid, ${chunk.position}, ${chunk.content}, ${chunk.headingChain},
              ${chunk.tokenCount}, to_tsvector('simple', left(${`${chunk.headingChain}\n${chunk.content}`}, 200000)),
              ${embedding}::vector)`;
  }
}
