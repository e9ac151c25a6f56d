-- Related memories now use engram_recall_candidates like recall does; the
-- older vector-only search function has no caller left.
DROP FUNCTION "engram_vector_search"(vector, uuid[], text, uuid, timestamptz, timestamptz, uuid, integer, boolean);
