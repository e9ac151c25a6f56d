-- A memory still filed under a topic being deleted (its delete unfiles them a batch at a time) shows
-- no topic, as every read of a memory does: the topic is not_found to every request. Hidden here, in
-- the join, rather than by a lookup of the entries' topics after this statement (a round trip per recall).
CREATE OR REPLACE FUNCTION "engram_recall_entries"("p_memory_ids" uuid[], "p_chunk_ids" uuid[], "p_excerpt" integer,
                                        "p_user_id" uuid, "p_hub_ids" uuid[])
RETURNS TABLE ("id" uuid, "title" text, "summary" text, "kind" text, "stability" text, "source" text, "created_at" timestamptz,
               "hub_id" uuid, "hub_name" text, "topic_id" uuid, "topic_name" text, "chunk_content" text, "heading_chain" text)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
BEGIN
  IF p_user_id IS NULL THEN
    RAISE EXCEPTION 'engram_recall_entries: p_user_id is required' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  -- Only hubs the caller belongs to, whatever the caller passed.
  p_hub_ids := ARRAY(SELECT hm."hub_id" FROM "hub_members" hm WHERE hm."user_id" = p_user_id AND hm."hub_id" = ANY(p_hub_ids));
  RETURN QUERY
  SELECT m."id", m."title"::text, m."summary"::text, m."kind"::text, m."stability"::text, m."source"::text, m."created_at"::timestamptz,
         m."hub_id", h."name"::text, t."id", t."name"::text,
         CASE WHEN c."id" IS NULL THEN left(m."content", p_excerpt) ELSE c."content" END::text,
         coalesce(c."heading_chain", '')::text
  FROM unnest(p_memory_ids, p_chunk_ids) AS p(memory_id, chunk_id)
  JOIN "memories" m ON m."id" = p.memory_id AND m."hub_id" = ANY(p_hub_ids) AND m."state" = 'active'
  JOIN "hubs" h ON h."id" = m."hub_id"
  LEFT JOIN "topics" t ON t."id" = m."topic_id" AND t."deleting_at" IS NULL
  -- A memory sent back to processing is shown by its current text, never by its old version's chunk.
  LEFT JOIN "chunks" c ON c."id" = p.chunk_id AND c."memory_id" = m."id" AND m."processing_status" NOT IN ('pending', 'running');
END
$fn$;
