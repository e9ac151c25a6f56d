import { createHash } from "node:crypto";
import type { DbClient } from "@/lib/db/database.ts";
import { noteTableWrites } from "@/lib/db/embedded-maintenance.ts";
import { hanGlossWords } from "@/lib/ai/gloss-han.ts";
import { newId } from "@/lib/ids.ts";
import { vectorParameter } from "./vector-parameter.ts";

export interface ChunkInput {
  position: number;
  content: string;
  headingChain: string;
  tokenCount: number;
  /** 384 numbers, or null when no embedding model is available (lexical-only). */
  embedding: number[] | null;
  /** The embedder (its id, lib/ai/embedder.ts) the vector came from; null (or absent) for none, or not known. */
  embeddingModel?: string | null;
  /** English glosses of the chunk's Chinese words (lib/ai/gloss-han.ts), indexed with it; "" for none. */
  gloss: string;
}

/**
 * Replaces a memory's chunks with their lexical and vector index entries.
 * The only writer of chunks.search_vector and chunks.embedding.
 *
 * Each chunk's lexical entry also carries the memory's title: a section that
 * never repeats what the document is about would otherwise be unfindable by it.
 * A chunk with Chinese text also carries its words' English glosses (`gloss`), so an English
 * question finds it by its meaning, not only by the names both share.
 * One multi-row INSERT so the BM25 statistics triggers run once per memory.
 */
export async function replaceChunks(tx: DbClient, memory: { id: string; hubId: string }, chunks: ChunkInput[]): Promise<void> {
  await tx.$executeRaw`DELETE FROM chunks WHERE memory_id = ${memory.id}::uuid`;
  if (chunks.length === 0) return;
  const ids = chunks.map(() => newId());
  // One parameter per embedding, in pgvector's binary format (vector-parameter.ts): parsing 384
  // decimal numbers per chunk cost the embedded database ~1.2 ms each, on the thread that answers
  // the API. ($10 onwards; the text differs by chunk count, up to MAX_CHUNKS + 9 parameters.)
  const embeddingSlots = chunks.map((_, i) => `$${10 + i}::vector`).join(", ");
  await tx.$executeRawUnsafe(
    `INSERT INTO chunks (id, memory_id, hub_id, position, content, heading_chain, token_count, search_vector, search_length, embedding, embedding_model)
     SELECT c.id, $1::uuid, $2::uuid, c.position, c.content, c.heading_chain, c.token_count, c.vec, engram_tsvector_length(c.vec), c.embedding,
            CASE WHEN c.embedding IS NULL THEN NULL ELSE c.embedding_model END
     FROM (
       SELECT u.id, u.position, u.content, u.heading_chain, u.token_count, u.embedding, u.embedding_model,
              engram_document_tsvector(coalesce(m.title, '') || E'\\n' || u.heading_chain || E'\\n' || u.content || E'\\n' || u.gloss) AS vec
       FROM unnest($3::uuid[], $4::int[], $5::text[], $6::text[], $7::int[], ARRAY[${embeddingSlots}]::vector[], $8::text[], $9::text[])
              AS u(id, position, content, heading_chain, token_count, embedding, gloss, embedding_model)
       LEFT JOIN memories m ON m.id = $1::uuid
     ) AS c`,
    memory.id,
    memory.hubId,
    ids,
    chunks.map((chunk) => chunk.position),
    chunks.map((chunk) => chunk.content),
    chunks.map((chunk) => chunk.headingChain),
    chunks.map((chunk) => chunk.tokenCount),
    chunks.map((chunk) => chunk.gloss),
    chunks.map((chunk) => chunk.embeddingModel ?? null),
    ...chunks.map((chunk) => (chunk.embedding ? vectorParameter(chunk.embedding) : null)),
  );
  // Statistics follow bulk indexing (embedded database: autoanalyze's job).
  noteTableWrites(chunks.length);
}

/**
 * The vectors a memory's stored chunks have, with the model each came from (null: stored before that
 * was recorded), by the text they were embedded from (heading path and content, as the index step
 * embeds them). A chunk whose text is unchanged needs no new embedding from the same model.
 */
export async function storedChunkVectors(db: DbClient, memoryId: string): Promise<Map<string, { vector: number[]; model: string | null }>> {
  const rows = await db.$queryRaw<{ heading_chain: string; content: string; embedding: string; model: string | null }[]>`
    SELECT heading_chain, content, embedding::text AS embedding, embedding_model AS model FROM chunks WHERE memory_id = ${memoryId}::uuid AND embedding IS NOT NULL`;
  return new Map(rows.map((row) => [row.heading_chain ? `${row.heading_chain}\n${row.content}` : row.content, { vector: JSON.parse(row.embedding) as number[], model: row.model }]));
}

/**
 * The English glosses of a memory's chunks that have Chinese text, keyed by the text they were made
 * from (heading path and content): what retitleChunks needs, worked out before its transaction (the
 * first Chinese text a process meets loads the dictionary, gloss-han.ts). Only non-ASCII chunks whose
 * texts `known` has no entry for are read and glossed ("" for one with no Chinese words).
 */
export async function chunkGlosses(db: DbClient, memoryId: string, known: Map<string, string> = new Map()): Promise<Map<string, string>> {
  const glosses = new Map(known);
  for (const text of await chunkTextsToGloss(db, memoryId, known)) {
    if (!glosses.has(text)) glosses.set(text, await hanGlossWords(text));
  }
  return glosses;
}

/**
 * The texts (heading path and content) of a memory's non-ASCII chunks that `known` has no entry for.
 * Those it has are told apart in the database by their md5, not read: retitleChunks asks under the
 * memory's row lock, and sending every text back read megabytes there on each rename.
 */
export async function chunkTextsToGloss(db: DbClient, memoryId: string, known: Map<string, string> = new Map()): Promise<string[]> {
  const knownMd5 = [...known.keys()].map((text) => createHash("md5").update(text, "utf8").digest("hex"));
  const rows = await db.$queryRaw<{ text: string }[]>`
    SELECT t.text FROM chunks c
      CROSS JOIN LATERAL (SELECT CASE WHEN c.heading_chain = '' THEN c.content ELSE c.heading_chain || E'\n' || c.content END AS text) t
     WHERE c.memory_id = ${memoryId}::uuid AND (c.content ~ '[^\x01-\x7f]' OR c.heading_chain ~ '[^\x01-\x7f]')
       AND md5(t.text) <> ALL(${knownMd5}::text[])`;
  return rows.map((row) => row.text);
}

/**
 * Rewrites the lexical entries of a memory's chunks with its current title (read in the caller's
 * transaction, after its update of the title, which holds the memory's row): a new title re-indexes
 * what the chunks already hold, with no model and no pipeline run. `glosses` were worked out before
 * that transaction; a chunk a job wrote since (its text not among them) is glossed here, under the
 * row lock a job needs to write chunks: indexed without its glosses, it missed every English question
 * only they answered until the memory was processed again.
 */
export async function retitleChunks(tx: DbClient, memoryId: string, known: Map<string, string>): Promise<void> {
  const glosses = await chunkGlosses(tx, memoryId, known);
  await tx.$executeRaw`
    UPDATE chunks AS c SET search_vector = v.vec, search_length = engram_tsvector_length(v.vec)
    FROM (
      SELECT k.id,
             engram_document_tsvector(coalesce(m.title, '') || E'\n' || k.heading_chain || E'\n' || k.content || E'\n' || coalesce(g.gloss, '')) AS vec
      FROM chunks AS k
      JOIN memories AS m ON m.id = k.memory_id
      LEFT JOIN unnest(${[...glosses.keys()]}::text[], ${[...glosses.values()]}::text[]) AS g(text, gloss)
        ON g.text = CASE WHEN k.heading_chain = '' THEN k.content ELSE k.heading_chain || E'\n' || k.content END
      WHERE k.memory_id = ${memoryId}::uuid
    ) AS v
    WHERE c.id = v.id`;
}
