-- The address and name a sign-in provider gave (GET /v1/auth/identities); filled at the next sign-in.
ALTER TABLE "oauth_accounts" ADD COLUMN "provider_email" TEXT NOT NULL DEFAULT '';
ALTER TABLE "oauth_accounts" ADD COLUMN "provider_name" TEXT NOT NULL DEFAULT '';
