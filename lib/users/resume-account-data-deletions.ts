import { runAsBackground } from "@/lib/db/background-work.ts";
import type { Database, Db } from "@/lib/db/database.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";
import { eraseAccountData } from "./delete-account-data.ts";

const RESUME_EVERY_MS = 10 * 60_000;
/** Accounts one sweep takes up (each to its end, its memories a bounded batch per transaction). */
const ACCOUNTS_PER_SWEEP = 20;
/**
 * Sweeps (of any instance) that take up one deletion before it is given up. A deletion that keeps
 * failing deleted, every 10 minutes on every instance and for good, whatever the user wrote since.
 */
export const ACCOUNT_DELETION_SWEEP_ATTEMPTS = 3;

/**
 * The sweep: finishes account-data deletions whose request did not (the process stopped, or a batch
 * failed, after some of the personal hub's memories were already gone). The caller may never come back
 * to retry, and a half-emptied account is neither what they had nor what they asked for. Returns how
 * many were finished; one that fails again is logged and left marked for the next sweep, up to
 * ACCOUNT_DELETION_SWEEP_ATTEMPTS sweeps: the next one gives it up, logged loudly, and clears its mark.
 */
export async function resumeAccountDataDeletions(db: Db): Promise<number> {
  const users = await db.$queryRaw<{ id: string; requestedAt: Date }[]>`
    SELECT id::text AS id, data_deletion_requested_at AS "requestedAt" FROM users
     WHERE data_deletion_requested_at IS NOT NULL ORDER BY data_deletion_requested_at LIMIT ${ACCOUNTS_PER_SWEEP}`;
  let finished = 0;
  for (const user of users) {
    try {
      // Counted (and committed) before the attempt, so one that stops the process counts too.
      const [counted] = await db.$queryRaw<{ attempts: number }[]>`
        UPDATE users SET data_deletion_attempts = data_deletion_attempts + 1
         WHERE id = ${user.id}::uuid AND data_deletion_requested_at = ${user.requestedAt} RETURNING data_deletion_attempts AS attempts`;
      // Finished (or asked again) since it was read.
      if (!counted) continue;
      if (counted.attempts > ACCOUNT_DELETION_SWEEP_ATTEMPTS) {
        const cleared = await db.$executeRaw`
          UPDATE users SET data_deletion_requested_at = NULL WHERE id = ${user.id}::uuid AND data_deletion_requested_at = ${user.requestedAt}`;
        if (cleared) {
          console.error(
            `[engram] account data: gave up the deletion of user ${user.id}'s data asked for at ${user.requestedAt.toISOString()} after ${ACCOUNT_DELETION_SWEEP_ATTEMPTS} failed sweeps; what is left of it stays until the user asks again`,
          );
        }
        continue;
      }
      if ((await eraseAccountData(db, user.id, user.requestedAt)).finished) finished++;
    } catch (error) {
      console.error(`[engram] account data: finishing the deletion of user ${user.id}'s data failed; the next sweeps try again (${ACCOUNT_DELETION_SWEEP_ATTEMPTS} in all, then it is given up)`, error);
    }
  }
  return finished;
}

/** Runs the sweep every 10 minutes (and at start, which is when a crash mid-deletion is found) as background work. */
export function startAccountDataDeletionsResume(database: Database): void {
  runPeriodically("account data: deletions resume", RESUME_EVERY_MS, () => runAsBackground(() => resumeAccountDataDeletions(database.prisma)));
}
