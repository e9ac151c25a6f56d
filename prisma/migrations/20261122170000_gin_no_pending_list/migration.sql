-- Full-text indexes without GIN's pending list. With fastupdate (the default)
-- new entries wait in an unsorted list that every search scans in full until
-- a vacuum merges it; the embedded database has no autovacuum, so after a
-- burst of ingest each recall scanned hundreds of pending pages (measured:
-- 1,500 new chunks took recall at 10k chunks from p50 16 ms to 40 ms).
-- Writing entries straight into the index costs ~0.5 ms more per chunk.
ALTER INDEX "chunks_search_vector_idx" SET (fastupdate = off);
ALTER INDEX "memories_search_vector_idx" SET (fastupdate = off);
ALTER INDEX "memories_search_vector_unindexed_idx" SET (fastupdate = off);

-- Merge what is already pending.
SELECT gin_clean_pending_list('chunks_search_vector_idx'::regclass);
SELECT gin_clean_pending_list('memories_search_vector_idx'::regclass);
SELECT gin_clean_pending_list('memories_search_vector_unindexed_idx'::regclass);
