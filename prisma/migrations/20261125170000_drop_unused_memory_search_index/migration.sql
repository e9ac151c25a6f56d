-- Issue 16 (ingest cost): memories_search_vector_idx indexed every memory's whole-content tsvector,
-- but no query reads it. Every lexical search of memories (not chunks) is of memories still
-- pending or running, which memories_search_vector_unindexed_idx (partial) answers. It cost each
-- create of a 5 KB memory a few hundred GIN entries, each edit as many again, and its disk.
DROP INDEX IF EXISTS "memories_search_vector_idx";
