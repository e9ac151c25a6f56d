-- Where an OAuth client without an account came from (the registering or first-naming address,
-- an IPv6 address cut to its /64): registrations are capped per address as well as in all.
ALTER TABLE "oauth_clients" ADD COLUMN "created_from" TEXT;
CREATE INDEX "oauth_clients_created_from_created_at_idx" ON "oauth_clients" ("created_from", "created_at");
