-- DELETE /v1/account/data deletes the personal hub's memories a bounded batch per transaction before its
-- last transaction, so a process stopped among them left some memories gone and nothing to finish the
-- rest. The request marks the account first and clears the mark in its last transaction; the sweep
-- (lib/users/resume-account-data-deletions.ts) finishes every account still marked.
ALTER TABLE "users" ADD COLUMN "data_deletion_requested_at" TIMESTAMPTZ(3);
CREATE INDEX "users_data_deletion_requested_at_idx" ON "users" ("data_deletion_requested_at") WHERE "data_deletion_requested_at" IS NOT NULL;
