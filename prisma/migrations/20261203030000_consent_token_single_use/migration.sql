-- The consent form's token (hashed) on the grant it made: a form posted again within its 15 minutes
-- made another grant and code each time; the unique index lets one form make one grant.
ALTER TABLE "oauth_grants" ADD COLUMN "consent_token_hash" TEXT;
CREATE UNIQUE INDEX "oauth_grants_consent_token_hash_key" ON "oauth_grants"("consent_token_hash");
