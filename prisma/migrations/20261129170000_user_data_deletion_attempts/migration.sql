-- A deletion of an account's data that kept failing stayed marked for good, and every sweep on every
-- instance (each 10 minutes) went on deleting what the user wrote since. The sweep counts its attempts
-- here and gives the deletion up (logged, mark cleared) past its cap (lib/users/resume-account-data-deletions.ts).
ALTER TABLE "users" ADD COLUMN "data_deletion_attempts" INTEGER NOT NULL DEFAULT 0;
