-- When a sign-in code's mail was handed to the relay (or may have been). A code whose send is still
-- under way must not keep an older, delivered code from working: only a newer code that was sent
-- replaces it, and the newer send may yet be refused.
ALTER TABLE "email_sign_in_codes" ADD COLUMN "sent_at" TIMESTAMPTZ(3);
-- consumed_at = created_at does not mean a code is still being sent: the code before this one left a
-- mailed code that way when a newer code existed as it was handed over. The outbox row written with
-- the code (same address and time) says when its mail went; without one (pruned, or the relay left
-- it unsure), every code but one asked for within the last minute (its send may be under way) was sent.
UPDATE "email_sign_in_codes" AS c
SET "sent_at" = COALESCE(
  (SELECT max(o."sent_at") FROM "mail_outbox" AS o WHERE o."kind" = 'sign_in_code' AND o."to_address" = c."email" AND o."created_at" = c."created_at"),
  c."created_at"
)
WHERE c."consumed_at" IS DISTINCT FROM c."created_at"
   OR c."created_at" < now() - interval '60 seconds'
   OR EXISTS (SELECT 1 FROM "mail_outbox" AS o WHERE o."kind" = 'sign_in_code' AND o."to_address" = c."email" AND o."created_at" = c."created_at" AND o."sent_at" IS NOT NULL);
