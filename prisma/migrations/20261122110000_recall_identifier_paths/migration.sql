-- Paths: index every segment of a path-like identifier on its own too, so
-- "rate_limits.yaml" finds "config/rate_limits.yaml".
CREATE OR REPLACE FUNCTION "engram_identifier_terms"("doc" text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(
           lower(regexp_replace(t.tok, '[^A-Za-z0-9]', '', 'g'))
           || CASE WHEN t.tok ~ '[a-z][A-Z]' THEN ' ' || lower(regexp_replace(t.tok, '([a-z0-9])([A-Z])', '\1 \2', 'g')) ELSE '' END
           || CASE WHEN t.tok ~ '[/:]' THEN ' ' || coalesce((
                SELECT string_agg(lower(regexp_replace(seg, '[^A-Za-z0-9]', '', 'g')), ' ')
                FROM regexp_split_to_table(t.tok, '[/:]+') AS seg WHERE seg ~ '[A-Za-z0-9]'), '') ELSE '' END,
           ' '), '')
  FROM (SELECT m[1] AS tok FROM regexp_matches("doc", '([A-Za-z0-9]+(?:[_.:/-]+[A-Za-z0-9]+)+|[A-Za-z0-9]*[a-z][A-Z][A-Za-z0-9]*)', 'g') AS m) AS t
$$;

-- Re-analyse what was indexed with the previous definition.
UPDATE "memories" SET "search_vector" = "engram_document_tsvector"("title" || E'\n' || "content");
UPDATE "chunks" AS c SET
  "search_vector" = "engram_document_tsvector"(m."title" || E'\n' || c."heading_chain" || E'\n' || c."content")
FROM "memories" AS m WHERE m."id" = c."memory_id";
UPDATE "chunks" SET "search_length" = "engram_tsvector_length"("search_vector") WHERE "search_vector" IS NOT NULL;
