import type { Database } from "@/lib/db/database.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";

/**
 * How long a dead invite (revoked, accepted, or past its expiry) is kept: for that long its link still
 * tells what became of it rather than 404 (the public view shows its state, accept answers 410 revoked,
 * used or expired), and an expired one can still be regenerated; the hub's invite list never shows it.
 * The 20-invite cap counts only usable invites, so without this every invite a hub ever made (and
 * every invite/revoke loop) stayed for good.
 */
export const INVITE_RETENTION_MS = 30 * 24 * 60 * 60_000;
/** Rows deleted per statement: a prune never holds locks for long. */
const PRUNE_BATCH = 1000;
const PRUNE_EVERY_MS = 60 * 60_000;

/** Deletes invites dead for longer than the retention, in bounded batches. Returns rows deleted. */
export async function pruneInvites(database: Database, now = new Date(), maxBatches = 20): Promise<number> {
  const cutoff = new Date(now.getTime() - INVITE_RETENTION_MS);
  const where = {
    OR: [{ state: "revoked", revokedAt: { lt: cutoff } }, { state: "accepted", acceptedAt: { lt: cutoff } }, { expiresAt: { lt: cutoff } }],
  };
  return deleteInBatches(
    (take) => database.prisma.invite.findMany({ where, select: { id: true }, take }),
    // The condition again: an invite regenerated since the read (a fresh expiry) stays.
    (ids) => database.prisma.invite.deleteMany({ where: { ...where, id: { in: ids } } }),
    PRUNE_BATCH,
    maxBatches,
  );
}

/** Prunes long-dead invites every hour for the life of the process. */
export function startInvitesPrune(database: Database): void {
  runPeriodically("invites: prune", PRUNE_EVERY_MS, () => pruneInvites(database));
}
