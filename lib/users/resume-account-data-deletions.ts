import { runAsBackground } from "@/lib/db/background-work.ts";
import { PURGE_BATCHES_PER_HUB } from "@/lib/hubs/purge-deleted-hubs.ts";
import type { Database, Db } from "@/lib/db/database.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";
import { eraseAccountData } from "./delete-account-data.ts";

const RESUME_EVERY_MS = 10 * 60_000;
/**
 * Accounts one sweep takes up (each for at most PURGE_BATCHES_PER_HUB batches of memories, a bounded
 * batch per transaction; a larger one is finished over several sweeps).
 */
const ACCOUNTS_PER_SWEEP = 20;
/**
 * Sweeps (of any instance) that take up one deletion before it is given up. A deletion that keeps
 * failing deleted, every 10 minutes on every instance and for good, whatever the user wrote since.
 */
export const ACCOUNT_DELETION_SWEEP_ATTEMPTS = 3;
/**
 * How long a deletion's lease lasts unrenewed. The run working on it renews it before each batch and
 * on a timer (a fifth of this) while it runs, the blob deletes between batches included, and lets it
 * go when it fails; a lease this old is a run that stopped (its process gone).
 */
export const ACCOUNT_DELETION_LEASE_MS = 5 * 60_000;

/**
 * The sweep: finishes account-data deletions whose request did not (the process stopped, or a batch
 * failed, after some of the personal hub's memories were already gone). The caller may never come back
 * to retry, and a half-emptied account is neither what they had nor what they asked for. Returns how
 * many were finished; one that fails again is logged and left marked for the next sweep, up to
 * ACCOUNT_DELETION_SWEEP_ATTEMPTS sweeps: the next one gives it up, logged loudly, and clears its mark.
 * A deletion whose lease is fresh has a run working on it (its request, or another instance's sweep):
 * it is left to that run and not counted, or a rolling deploy's start-up sweeps counted the request's
 * own run as failures and gave the deletion up under it.
 */
export async function resumeAccountDataDeletions(db: Db): Promise<number> {
  const users = await db.$queryRaw<{ id: string; requestedAt: Date }[]>`
    SELECT id::text AS id, data_deletion_requested_at AS "requestedAt" FROM users
     WHERE data_deletion_requested_at IS NOT NULL
       AND (data_deletion_heartbeat_at IS NULL OR data_deletion_heartbeat_at < now() - make_interval(secs => ${ACCOUNT_DELETION_LEASE_MS / 1000}))
     ORDER BY data_deletion_requested_at LIMIT ${ACCOUNTS_PER_SWEEP}`;
  let finished = 0;
  for (const user of users) {
    try {
      // Counted (and committed) before the attempt, so one that stops the process counts too, and the
      // lease taken in the same statement: of two sweeps reading the same stale lease, one takes it.
      const [counted] = await db.$queryRaw<{ attempts: number }[]>`
        UPDATE users SET data_deletion_attempts = data_deletion_attempts + 1, data_deletion_heartbeat_at = now()
         WHERE id = ${user.id}::uuid AND data_deletion_requested_at = ${user.requestedAt}
           AND (data_deletion_heartbeat_at IS NULL OR data_deletion_heartbeat_at < now() - make_interval(secs => ${ACCOUNT_DELETION_LEASE_MS / 1000}))
        RETURNING data_deletion_attempts AS attempts`;
      // Finished, asked again, or taken up by another run since it was read.
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
      // Capped as the hub purge is: one huge account (or one written in as fast as it goes) held the sweep,
      // and every deletion after it, for good. The rest is the next sweep's (eraseAccountData lets the lease go).
      if ((await eraseAccountData(db, user.id, user.requestedAt, { maxBatches: PURGE_BATCHES_PER_HUB })).finished) finished++;
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
