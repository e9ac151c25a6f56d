-- The client address a sign-in code was asked from: one client is mailed at most
-- ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR codes an hour across addresses (rows are kept an hour).
ALTER TABLE "email_sign_in_codes" ADD COLUMN "client_address" TEXT;
CREATE INDEX "email_sign_in_codes_client_address_created_at_idx" ON "email_sign_in_codes"("client_address", "created_at" DESC);
