-- Who a mail went out for (an invitation's inviter): the hourly cap on invitation e-mails counts the
-- outbox rows of one sender, which outlive the hubs and invites they were about.
ALTER TABLE "mail_outbox" ADD COLUMN "sender_id" UUID;

CREATE INDEX "mail_outbox_sender_id_kind_created_at_idx" ON "mail_outbox"("sender_id", "kind", "created_at");
