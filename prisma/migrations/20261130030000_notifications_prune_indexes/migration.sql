-- The hourly prune of notifications past retention (lib/notifications/prune-notifications.ts) selects
-- rows no longer pending by COALESCE(resolved_at, created_at) and pending ones by expires_at. No index
-- held either, so every run read the whole table, which grows with every person's bell history. Each
-- side of its OR now has a partial index matching its predicate (PostgreSQL combines them in one
-- bitmap scan); pending rows without an expiry are never pruned and stay out of the second.
CREATE INDEX "notifications_prune_settled_idx" ON "notifications" ((COALESCE("resolved_at", "created_at"))) WHERE "status" <> 'pending';
CREATE INDEX "notifications_prune_pending_idx" ON "notifications" ("expires_at") WHERE "status" = 'pending' AND "expires_at" IS NOT NULL;
