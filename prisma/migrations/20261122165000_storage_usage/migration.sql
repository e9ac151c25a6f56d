-- Storage quotas (issue 18): bytes of content and number of memories per user (owner) and per hub,
-- kept current by triggers so a quota check reads one row instead of summing a table.
CREATE TABLE "storage_usage" (
    "scope" TEXT NOT NULL,
    "scope_id" UUID NOT NULL,
    "bytes" BIGINT NOT NULL DEFAULT 0,
    "memories" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "storage_usage_pkey" PRIMARY KEY ("scope","scope_id")
);

CREATE FUNCTION "engram_storage_usage_add"("p_scope" text, "p_id" uuid, "p_bytes" bigint, "p_memories" integer) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO "storage_usage" ("scope", "scope_id", "bytes", "memories") VALUES ("p_scope", "p_id", "p_bytes", "p_memories")
  ON CONFLICT ("scope", "scope_id") DO UPDATE
    SET "bytes" = "storage_usage"."bytes" + EXCLUDED."bytes", "memories" = "storage_usage"."memories" + EXCLUDED."memories"
$$;

CREATE FUNCTION "engram_memories_storage_usage"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    PERFORM "engram_storage_usage_add"('user', OLD."owner_id", -octet_length(OLD."content"), -1);
    PERFORM "engram_storage_usage_add"('hub', OLD."hub_id", -octet_length(OLD."content"), -1);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    PERFORM "engram_storage_usage_add"('user', NEW."owner_id", octet_length(NEW."content"), 1);
    PERFORM "engram_storage_usage_add"('hub', NEW."hub_id", octet_length(NEW."content"), 1);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER "memories_storage_usage_insert_delete" AFTER INSERT OR DELETE ON "memories"
FOR EACH ROW EXECUTE FUNCTION "engram_memories_storage_usage"();

CREATE TRIGGER "memories_storage_usage_update" AFTER UPDATE OF "content", "hub_id", "owner_id" ON "memories"
FOR EACH ROW WHEN (OLD."content" IS DISTINCT FROM NEW."content" OR OLD."hub_id" IS DISTINCT FROM NEW."hub_id" OR OLD."owner_id" IS DISTINCT FROM NEW."owner_id")
EXECUTE FUNCTION "engram_memories_storage_usage"();

INSERT INTO "storage_usage" ("scope", "scope_id", "bytes", "memories")
SELECT 'user', "owner_id", sum(octet_length("content")), count(*) FROM "memories" GROUP BY "owner_id";
INSERT INTO "storage_usage" ("scope", "scope_id", "bytes", "memories")
SELECT 'hub', "hub_id", sum(octet_length("content")), count(*) FROM "memories" GROUP BY "hub_id";
