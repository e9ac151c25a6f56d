-- When a sign-in code's mail was handed to the relay (or may have been). A code whose send is still
-- under way must not keep an older, delivered code from working: only a newer code that was sent
-- replaces it, and the newer send may yet be refused.
ALTER TABLE "email_sign_in_codes" ADD COLUMN "sent_at" TIMESTAMPTZ(3);
-- Every code but one still being sent (written ended at its creation time) was sent.
UPDATE "email_sign_in_codes" SET "sent_at" = "created_at" WHERE "consumed_at" IS DISTINCT FROM "created_at";
