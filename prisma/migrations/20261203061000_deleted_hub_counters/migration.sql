-- A hub's counters go with the hub. Its 'hub' and 'inbox' rows and its owners' shares (hub_owner_usage)
-- stayed behind after the purge deleted the hub, one set for every hub ever deleted, read by nothing.
-- Deferred to the commit: a delete that cascades to memories or memberships shifts their counters in
-- triggers that fire after this delete's own, and wrote the rows again behind an immediate clean-up.
CREATE FUNCTION "engram_hubs_storage_usage_delete"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM "storage_usage" WHERE "scope" IN ('hub', 'inbox') AND "scope_id" = OLD."id";
  DELETE FROM "hub_owner_usage" WHERE "hub_id" = OLD."id";
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER "hubs_storage_usage_delete" AFTER DELETE ON "hubs"
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "engram_hubs_storage_usage_delete"();

-- Those left by hubs deleted so far.
DELETE FROM "storage_usage" u WHERE u."scope" IN ('hub', 'inbox') AND NOT EXISTS (SELECT FROM "hubs" h WHERE h."id" = u."scope_id");
DELETE FROM "hub_owner_usage" s WHERE NOT EXISTS (SELECT FROM "hubs" h WHERE h."id" = s."hub_id");
