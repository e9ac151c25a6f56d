-- Issue 10 (latency after an import): with the default random_page_cost (4, spinning disks) the
-- planner preferred reading and sorting every chunk of a 2,000-chunk hub (~12 ms on the embedded
-- database) to the HNSW index (~1 ms), because it priced the index's page reads as random disk
-- reads. The chunks and their index are in memory (PGlite) or cached (a server's shared buffers):
-- price them as such inside the candidates search only.
ALTER FUNCTION "engram_recall_candidates"(uuid, vector, uuid[], text, uuid, timestamptz, timestamptz, uuid, integer, boolean, uuid[], uuid[], integer[], text[])
  SET "random_page_cost" = '1.1';
