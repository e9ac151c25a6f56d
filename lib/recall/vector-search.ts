import type { DbClient } from "@/lib/db/database.ts";
import { scopeArguments, type SearchScope } from "./search-scope.ts";

/**
 * Below this many chunks in scope an exact scan is complete and still cheap
 * (~50 ms for 6k chunks in embedded WASM Postgres, against ~5 ms for HNSW).
 */
const EXACT_SCAN_MAX_CHUNKS = 800;

export interface VectorHit {
  chunkId: string;
  memoryId: string;
  /** Cosine similarity, -1..1. */
  similarity: number;
}

export function vectorLiteral(vector: number[]): string {
  return `[${vector.join(",")}]`;
}

/** Nearest chunks by cosine similarity within the scope (HNSW, or exact for small scopes). */
export async function vectorSearch(db: DbClient, vector: number[], scope: SearchScope, limit: number, chunkCount: number): Promise<VectorHit[]> {
  const rows = await db.$queryRawUnsafe<{ chunk_id: string; memory_id: string; similarity: number }[]>(
    `SELECT chunk_id, memory_id, similarity
     FROM engram_vector_search($1::vector, $2::uuid[], $3::text, $4::uuid, $5::timestamptz, $6::timestamptz, $7::uuid, $8::int, $9::boolean)`,
    vectorLiteral(vector),
    ...scopeArguments(scope),
    limit,
    chunkCount <= EXACT_SCAN_MAX_CHUNKS,
  );
  return rows.map((row) => ({ chunkId: row.chunk_id, memoryId: row.memory_id, similarity: Number(row.similarity) }));
}

/** Cosine similarity of given chunks to the query (lexical hits the vector leg did not reach). */
export async function chunkSimilarities(db: DbClient, vector: number[], chunkIds: string[]): Promise<Map<string, number>> {
  if (chunkIds.length === 0) return new Map();
  const rows = await db.$queryRawUnsafe<{ id: string; similarity: number }[]>(
    `SELECT id, 1 - (embedding <=> $1::vector) AS similarity FROM chunks WHERE id = ANY($2::uuid[]) AND embedding IS NOT NULL`,
    vectorLiteral(vector),
    chunkIds,
  );
  return new Map(rows.map((row) => [row.id, Number(row.similarity)]));
}
