-- A consent form answered with a deny: its token (hashed) is used up as an allow's is by the grant
-- it made (oauth_grants.consent_token_hash), so the same form posted again, an allow after the back
-- button, sends the app no code after its access_denied. Only needed while the form could be posted
-- (expires_at, its 15 minutes); the hourly OAuth prune deletes it after.
CREATE TABLE "oauth_denied_consents" (
    "consent_token_hash" TEXT NOT NULL,
    "user_id" UUID NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    CONSTRAINT "oauth_denied_consents_pkey" PRIMARY KEY ("consent_token_hash")
);
CREATE INDEX "oauth_denied_consents_expires_at_idx" ON "oauth_denied_consents"("expires_at");
ALTER TABLE "oauth_denied_consents" ADD CONSTRAINT "oauth_denied_consents_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;
