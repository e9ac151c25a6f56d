import type { SqlRunner } from "@/lib/db/database.ts";
import { scopeArguments, type SearchScope } from "./search-scope.ts";

/**
 * Below this many chunks in scope an exact scan is complete and still cheap
 * (~50 ms for 6k chunks in embedded WASM Postgres, against ~5 ms for HNSW).
 */
export const EXACT_SCAN_MAX_CHUNKS = 800;

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
export async function vectorSearch(sql: SqlRunner, vector: number[], scope: SearchScope, limit: number, chunkCount: number): Promise<VectorHit[]> {
  const rows = await sql.query<{ chunk_id: string; memory_id: string; similarity: number }>(
    `SELECT chunk_id, memory_id, similarity
     FROM engram_vector_search($1::vector, $2::uuid[], $3::text, $4::uuid, $5::timestamptz, $6::timestamptz, $7::uuid, $8::int, $9::boolean)`,
    [vectorLiteral(vector), ...scopeArguments(scope), limit, chunkCount <= EXACT_SCAN_MAX_CHUNKS],
  );
  return rows.map((row) => ({ chunkId: row.chunk_id, memoryId: row.memory_id, similarity: Number(row.similarity) }));
}
