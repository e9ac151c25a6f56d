import { runAsBackground } from "@/lib/db/background-work.ts";
import type { Database, Db } from "@/lib/db/database.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";
import { eraseAccountData } from "./delete-account-data.ts";

const RESUME_EVERY_MS = 10 * 60_000;
/** Accounts one sweep takes up (each to its end, its memories a bounded batch per transaction). */
const ACCOUNTS_PER_SWEEP = 20;

/**
 * The sweep: finishes account-data deletions whose request did not (the process stopped, or a batch
 * failed, after some of the personal hub's memories were already gone). The caller may never come back
 * to retry, and a half-emptied account is neither what they had nor what they asked for. Returns how
 * many were finished; one that fails again is logged and left marked for the next sweep.
 */
export async function resumeAccountDataDeletions(db: Db): Promise<number> {
  const users = await db.$queryRaw<{ id: string; requestedAt: Date }[]>`
    SELECT id::text AS id, data_deletion_requested_at AS "requestedAt" FROM users
     WHERE data_deletion_requested_at IS NOT NULL ORDER BY data_deletion_requested_at LIMIT ${ACCOUNTS_PER_SWEEP}`;
  let finished = 0;
  for (const user of users) {
    try {
      if ((await eraseAccountData(db, user.id, user.requestedAt)).finished) finished++;
    } catch (error) {
      console.error(`[engram] account data: finishing the deletion of user ${user.id}'s data failed; the next sweep tries again`, error);
    }
  }
  return finished;
}

/** Runs the sweep every 10 minutes (and at start, which is when a crash mid-deletion is found) as background work. */
export function startAccountDataDeletionsResume(database: Database): void {
  runPeriodically("account data: deletions resume", RESUME_EVERY_MS, () => runAsBackground(() => resumeAccountDataDeletions(database.prisma)));
}
