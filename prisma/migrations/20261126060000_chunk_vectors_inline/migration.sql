-- Recall latency (issue 10): a chunk row is ~3 KB (a 1,540-byte vector, its text and tsvector), over
-- the 2 KB at which PostgreSQL starts moving values out of line. pgvector's `vector` is EXTERNAL, so
-- the vector went first, and every distance a recall computes from the heap (its 40 nearest chunks,
-- every lexical hit's cosine, whole small scopes) cost a TOAST index lookup and read. Measured
-- interleaved on the embedded database, 10k chunks: 50 lexical hits' cosines 1.84 → 1.18 ms, 40
-- nearest with distances 1.46 → 1.19 ms, and the SQL lexical leg unchanged (11.9 / 10.9 ms).
-- Only both settings together: MAIN alone moved the tsvector out instead (SQL lexical leg 18.9 ms).
-- Rows written from now on; `VACUUM FULL chunks` rewrites older ones (docs/operations.md).
ALTER TABLE "chunks" SET (toast_tuple_target = 4080);
ALTER TABLE "chunks" ALTER COLUMN "embedding" SET STORAGE MAIN;
