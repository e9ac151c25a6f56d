-- A chat turn stores what its tools returned and what it cited (chat_messages.tool_calls, citations) and
-- replays its stream for a day (chat_events.data): a recall's memories and a save's result by id and
-- title, a running turn's passages, the finished message whole. A memory hard-deleted later kept its
-- title there for the session's owner to read. A delete now scrubs them in its own transaction
-- (lib/memories/drop-memory-copies.ts); this finds the rows naming a memory, and does the same once
-- for the rows that name memories deleted before.

-- The memory ids a stored document names: a result's or citation's memory_id, a recall's memories and
-- its passages (sources). IMMUTABLE, for the expression indexes below.
CREATE FUNCTION "chat_named_memory_ids"("doc" jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(DISTINCT "v" #>> '{}'), '{}'::text[])
    FROM (SELECT jsonb_path_query(coalesce("doc", 'null'::jsonb), 'lax $.**.memory_id') AS "v"
          UNION ALL SELECT jsonb_path_query(coalesce("doc", 'null'::jsonb), 'lax $.**.memories[*].id')
          UNION ALL SELECT jsonb_path_query(coalesce("doc", 'null'::jsonb), 'lax $.**.sources[*].id')) AS "named"
   WHERE jsonb_typeof("v") = 'string'
$$;

-- The document with each object naming one of `ids` (by id or memory_id) titled `title`, "(deleted)" or
-- "(moved)" (its shape kept, so the SDK still reads it), and the passages (sources) read from them gone.
CREATE FUNCTION "chat_scrub_memory_titles"("doc" jsonb, "ids" text[], "title" text DEFAULT '(deleted)') RETURNS jsonb LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  "result" jsonb;
BEGIN
  IF "doc" IS NULL THEN
    RETURN NULL;
  ELSIF jsonb_typeof("doc") = 'array' THEN
    SELECT coalesce(jsonb_agg("chat_scrub_memory_titles"("e", "ids", "title") ORDER BY "o"), '[]'::jsonb) INTO "result"
      FROM jsonb_array_elements("doc") WITH ORDINALITY AS "a"("e", "o");
    RETURN "result";
  ELSIF jsonb_typeof("doc") = 'object' THEN
    SELECT coalesce(jsonb_object_agg("key", CASE
             WHEN "key" = 'sources' AND jsonb_typeof("value") = 'array' THEN
               (SELECT coalesce(jsonb_agg("e" ORDER BY "o"), '[]'::jsonb) FROM jsonb_array_elements("value") WITH ORDINALITY AS "a"("e", "o")
                 WHERE NOT coalesce("e" ->> 'id' = ANY("ids"), false))
             ELSE "chat_scrub_memory_titles"("value", "ids", "title") END), '{}'::jsonb) INTO "result"
      FROM jsonb_each("doc");
    IF "doc" ? 'title' AND (coalesce("doc" ->> 'id' = ANY("ids"), false) OR coalesce("doc" ->> 'memory_id' = ANY("ids"), false)) THEN
      "result" := "result" || jsonb_build_object('title', "title");
    END IF;
    RETURN "result";
  END IF;
  RETURN "doc";
END $$;

-- Once, over what was stored before: the rows naming memories that no longer exist. Before the indexes:
-- the runner applies a migration in one transaction, and an index build's SHARE lock (held to its
-- commit) would stop every chat write, an event append included (it bumps the message row), for the
-- whole backfill; these take only the rows they change. A named id is looked up as a uuid, through
-- memories_pkey (compared as text, every memory would be read and hashed); one that is not a uuid names
-- no memory and is scrubbed. Run again, they change nothing more.
UPDATE "chat_messages" "m" SET "tool_calls" = "chat_scrub_memory_titles"("m"."tool_calls", "g"."ids"), "citations" = "chat_scrub_memory_titles"("m"."citations", "g"."ids")
  FROM (SELECT "c"."id", array_agg("n"."id") AS "ids"
          FROM "chat_messages" "c", unnest("chat_named_memory_ids"("c"."tool_calls") || "chat_named_memory_ids"("c"."citations")) AS "n"("id")
         WHERE NOT EXISTS (SELECT 1 FROM "memories" "x"
                            WHERE "x"."id" = CASE WHEN "n"."id" ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN "n"."id"::uuid END)
         GROUP BY "c"."id") "g"
 WHERE "m"."id" = "g"."id";
UPDATE "chat_events" "e" SET "data" = "chat_scrub_memory_titles"("e"."data", "g"."ids")
  FROM (SELECT "c"."message_id", "c"."seq", array_agg("n"."id") AS "ids"
          FROM "chat_events" "c", unnest("chat_named_memory_ids"("c"."data")) AS "n"("id")
         WHERE NOT EXISTS (SELECT 1 FROM "memories" "x"
                            WHERE "x"."id" = CASE WHEN "n"."id" ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN "n"."id"::uuid END)
         GROUP BY "c"."message_id", "c"."seq") "g"
 WHERE "e"."message_id" = "g"."message_id" AND "e"."seq" = "g"."seq";

-- Built last, so their locks are held only while they build.
CREATE INDEX "chat_messages_named_memory_ids_idx" ON "chat_messages" USING gin (("chat_named_memory_ids"("tool_calls") || "chat_named_memory_ids"("citations")));
CREATE INDEX "chat_events_named_memory_ids_idx" ON "chat_events" USING gin (("chat_named_memory_ids"("data")));
