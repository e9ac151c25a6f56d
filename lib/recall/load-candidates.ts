import type { SqlRunner } from "@/lib/db/database.ts";
import { scopeArguments, type SearchScope } from "./search-scope.ts";
import { vectorParameter } from "./vector-parameter.ts";

/**
 * Below this many chunks in scope an exact scan is complete and still cheap
 * (~50 ms for 6k chunks in embedded WASM Postgres, against ~5 ms for HNSW).
 */
const EXACT_SCAN_MAX_CHUNKS = 800;

/** Per-memory facts that ranking needs beyond the chunk scores. */
export interface CandidateFacts {
  hubId: string;
  kind: string;
  projectContext: { repo?: string; project?: string; branch?: string } | null;
  /** How many of the query's entities the memory (title + content) never mentions. */
  missingEntities: number;
}

export interface Candidates {
  /** Cosine similarity by chunk id: the vector leg's hits and the given lexical chunks (when embedded). */
  similarities: Map<string, number>;
  /** The vector leg's hits, nearest first. */
  vectorHits: { chunkId: string; memoryId: string; similarity: number }[];
  facts: Map<string, CandidateFacts>;
}

export interface CandidatesInput {
  /** The caller (required): the SQL searches only hubs they belong to, whatever scope.hubIds says. */
  userId: string;
  /** The query embedding; null: no vector leg (similarities stay unknown). */
  vector: number[] | null;
  scope: SearchScope;
  /** Nearest chunks to fetch. */
  k: number;
  /** Chunks in scope: small scopes are scanned exactly. */
  chunkCount: number;
  /** Lexical hits: chunks, and memories matched whole before chunking. */
  chunkIds: string[];
  memoryIds: string[];
  /** The query's specific entities, each as its analysed lexemes. */
  entities: { lexemes: string[] }[];
}

/**
 * One statement for everything ranking needs after the lexical leg: the
 * nearest chunks, the similarity of every lexical hit, and each candidate
 * memory's hub, kind, project context and missing entities (an entity counts
 * as mentioned when at least half of its lexemes occur in the memory).
 */
export async function loadCandidates(sql: SqlRunner, input: CandidatesInput): Promise<Candidates> {
  const rows = await sql.query<{
    chunk_id: string | null;
    memory_id: string;
    similarity: number | null;
    from_vector: boolean;
    hub_id: string;
    kind: string;
    project_context: unknown;
    missing_entities: number;
  }>(
    `SELECT chunk_id, memory_id, similarity, from_vector, hub_id, kind, project_context, missing_entities
     FROM engram_recall_candidates($1::uuid, $2::vector, $3::uuid[], $4::text, $5::uuid, $6::timestamptz, $7::timestamptz, $8::uuid, $9::int, $10::boolean,
                                   $11::uuid[], $12::uuid[], $13::int[], $14::text[])`,
    [
      input.userId,
      input.vector ? vectorParameter(input.vector) : null,
      ...scopeArguments(input.scope),
      input.vector ? input.k : 0,
      input.chunkCount <= EXACT_SCAN_MAX_CHUNKS,
      input.chunkIds,
      input.memoryIds,
      input.entities.flatMap((entity, i) => entity.lexemes.map(() => i)),
      input.entities.flatMap((entity) => entity.lexemes),
    ],
  );
  const candidates: Candidates = { similarities: new Map(), vectorHits: [], facts: new Map() };
  for (const row of rows) {
    const similarity = row.similarity === null ? null : Number(row.similarity);
    if (row.chunk_id && similarity !== null) {
      candidates.similarities.set(row.chunk_id, similarity);
      if (row.from_vector) candidates.vectorHits.push({ chunkId: row.chunk_id, memoryId: row.memory_id, similarity });
    }
    if (!candidates.facts.has(row.memory_id)) {
      candidates.facts.set(row.memory_id, {
        hubId: row.hub_id,
        kind: row.kind,
        projectContext: row.project_context && typeof row.project_context === "object" ? (row.project_context as CandidateFacts["projectContext"]) : null,
        missingEntities: Number(row.missing_entities),
      });
    }
  }
  candidates.vectorHits.sort((a, b) => b.similarity - a.similarity);
  return candidates;
}
