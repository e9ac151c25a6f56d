-- Issue 18 #1: invite links are bearer capabilities; the outbox used to store them whole.
-- Keep what tells links apart (the first 8 characters), drop the rest, as lib/mail/send-mail.ts now does.
UPDATE "mail_outbox"
SET "body" = regexp_replace("body", '(egi_[A-Za-z0-9_-]{4})[A-Za-z0-9_-]{39}', '\1…[redacted]', 'g')
WHERE "body" ~ 'egi_[A-Za-z0-9_-]{43}';
