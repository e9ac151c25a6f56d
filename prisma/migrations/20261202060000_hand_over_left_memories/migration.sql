-- A member who left a team hub (or was removed) kept owning what they wrote there, so it filled their
-- storage quota for good though they could no longer read, edit or delete it. Leaving and removal now
-- hand those memories to the hub's owner (lib/hubs/drop-membership.ts); this does the same for the ones
-- left behind before. Hubs marked deleted are left to their purge (the quota already leaves them out).
-- The memories triggers move the counters (storage_usage) with each row, as for any change of owner.
UPDATE "memories" AS m
   SET "owner_id" = h."owner_id"
  FROM "hubs" AS h
 WHERE h."id" = m."hub_id"
   AND h."hub_type" = 'team'
   AND h."deleted_at" IS NULL
   AND m."owner_id" <> h."owner_id"
   AND NOT EXISTS (SELECT 1 FROM "hub_members" AS hm WHERE hm."hub_id" = m."hub_id" AND hm."user_id" = m."owner_id");
