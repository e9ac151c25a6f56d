-- Pre-registration takeover (a review finding): a password sign-up never proves its address, yet a
-- later Google sign-in or e-mail code for that address landed in the account, which whoever signed
-- up could still enter. An account whose address is unproven is now claimed by the first proof:
-- its password, keys, grants and sessions end (lib/auth/claim-account.ts).
ALTER TABLE "users" ADD COLUMN "email_unverified" BOOLEAN NOT NULL DEFAULT false;
-- Sessions issued before this instant are refused (a claim sets it).
ALTER TABLE "users" ADD COLUMN "sessions_valid_after" TIMESTAMPTZ(3);
-- Existing password accounts that no provider ever vouched for are unproven as well.
UPDATE "users" u SET "email_unverified" = true
 WHERE u."password_hash" IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM "oauth_accounts" a WHERE a."user_id" = u."id");
