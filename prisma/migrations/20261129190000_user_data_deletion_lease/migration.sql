-- The account-data deletion sweep counted every sweep that picked a deletion up as a failed attempt,
-- with no record that a run was already working on it: during a rolling deploy each new instance's
-- start-up sweep counted one against a request still running, the next gave it up and cleared the
-- mark, and the request then stopped part-way. The run working on a deletion now keeps this lease
-- fresh (at the mark, per batch); a sweep takes the deletion up, and counts an attempt, only once the
-- lease is gone (its run failed) or stale (its run stopped) (lib/users/resume-account-data-deletions.ts).
ALTER TABLE "users" ADD COLUMN "data_deletion_heartbeat_at" TIMESTAMPTZ(3);
