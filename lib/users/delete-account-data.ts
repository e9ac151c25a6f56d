import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isDatabaseSessionKey, sessionStoreFor } from "@/lib/agent-sessions/session-store.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { Db, DbClient } from "@/lib/db/database.ts";
import { lockMemoriesOf } from "@/lib/db/row-lock.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { lockHubMembers } from "@/lib/hubs/hub-access.ts";
import { deleteHubMemories, PURGE_BATCHES_PER_HUB } from "@/lib/hubs/purge-deleted-hubs.ts";
import { kickCustomBoard } from "@/lib/boards/kick-custom-board.ts";
import { dropMemoryCopies } from "@/lib/memories/drop-memory-copies.ts";
import { detachedAt, detachUploads, removeBlobs } from "@/lib/uploads/sweep-uploads.ts";
import { ACCOUNT_DELETION_LEASE_MS, ACCOUNT_DELETION_SWEEP_ATTEMPTS } from "./resume-account-data-deletions.ts";

export interface DeleteAccountDataResult {
  deleted: true;
  memories: number;
  topics: number;
  configs: number;
  sessions: number;
}

/** A deletion this request could not finish, left to the sweep (202). */
export interface AccountDataDeletionPending {
  deleted: false;
  status: "pending";
}

/**
 * DELETE /v1/account/data (Memax's account.deleteAllData): empties the account, keeps it. It deletes
 * the personal hub's memories in bounded batches, then in one transaction everything else in it (what
 * memories a push added meanwhile, topics, decision gates, dream runs) and everything that is theirs
 * alone (synced configs with their versions, agent sessions, agent names, chats, notifications, topic
 * visits, uploads never attached). It keeps the account, its sign-ins, API keys and settings, and team hubs: what the
 * caller pushed there belongs to the team (delete it there while a member, or ask a hub admin; leaving removes nothing).
 */
export async function deleteAccountData(ctx: AuthContext): Promise<DeleteAccountDataResult | AccountDataDeletionPending> {
  const requestedAt = ctx.now();
  // Recorded (and committed) before anything goes: the batches below commit one by one, so a process
  // stopped among them left the account half emptied with nothing to finish it. The sweep
  // (resume-account-data-deletions.ts) finishes a deletion whose mark outlived its request.
  // A deletion asked for again is the sweep's to try afresh, however often it gave up the last one.
  // The lease taken with the mark: a sweep (of any instance) leaves the deletion to this request while
  // it runs, instead of counting it as a failed attempt and, the fourth time, giving it up under it.
  await ctx.db.$executeRaw`
    UPDATE users SET data_deletion_requested_at = ${requestedAt}, data_deletion_attempts = 0, data_deletion_heartbeat_at = now() WHERE id = ${ctx.user.id}::uuid`;
  let erased: Awaited<ReturnType<typeof eraseAccountData>>;
  try {
    // As many batches as a sweep takes: all of a huge account's inline held the request for hours.
    erased = await eraseAccountData(ctx.db, ctx.user.id, requestedAt, { maxBatches: PURGE_BATCHES_PER_HUB });
  } catch (error) {
    // A batch or the last transaction failed (it rolled back whole) and the run let its lease go: the
    // mark is still set, so the next sweep takes the deletion up at once and finishes it. Deletion
    // continues, which a 500 denied; the cause is logged, not answered. Without the mark (it could not
    // be read either) nothing will finish it, and the error stands.
    const marked = await ctx.db.$queryRaw<unknown[]>`
      SELECT 1 FROM users WHERE id = ${ctx.user.id}::uuid AND data_deletion_requested_at >= ${requestedAt}`.catch(() => []);
    if (marked.length === 0) throw error;
    console.error(`[engram] account data: deleting the data of user ${ctx.user.id} failed; the sweep finishes it`, error);
    return { deleted: false, status: "pending" };
  }
  const { finished, capped, ...result } = erased;
  // Cut at the cap, its lease let go: the next sweep goes on with it at once.
  if (capped) return { deleted: false, status: "pending" };
  if (!finished) {
    // The mark went while this ran. Another run finishing it deleted what was asked (its counts are
    // that run's); a sweep giving it up (attempts past its cap, only once this run's lease was stale)
    // left part of the data, which "deleted" would have claimed was gone.
    const [user] = await ctx.db.$queryRaw<{ givenUp: boolean }[]>`
      SELECT data_deletion_requested_at IS NULL AND data_deletion_attempts > ${ACCOUNT_DELETION_SWEEP_ATTEMPTS} AS "givenUp" FROM users WHERE id = ${ctx.user.id}::uuid`;
    if (user?.givenUp) {
      throw new ApiError("conflict", "The deletion was given up while this request ran (it had stalled); part of the account's data is left. Ask again to delete the rest");
    }
  }
  return result;
}

/**
 * Keeps the lease of the run working on the deletion asked for at `requestedAt` fresh: a sweep takes a
 * deletion up only once its lease is older than ACCOUNT_DELETION_LEASE_MS. Only its own mark's: a later
 * request's lease is that request's run, which this run does not finish for it (it leaves a later mark
 * set), so renewing it kept a stopped request's deletion from the sweep until this run ended.
 * Its own statement, not in a batch's transaction: that holds the user's row shared, and two runs'
 * batches doing so would each wait for the other to write it.
 */
async function renewLease(db: Db, userId: string, requestedAt: Date): Promise<void> {
  await db.$executeRaw`UPDATE users SET data_deletion_heartbeat_at = now() WHERE id = ${userId}::uuid AND data_deletion_requested_at = ${requestedAt}`;
}

/**
 * Inside a transaction: whether the deletion asked for at `requestedAt` is still wanted (its mark, or a
 * later request's, which asks for all it did and more, is set), holding the user's row so the mark
 * cannot be cleared before this transaction commits. FOR SHARE for a batch, so the request's and a
 * sweep's batches can run side by side; FOR NO KEY UPDATE for the last transaction, which clears the
 * mark: two of those holding the row shared would each wait for the other to clear it. Neither mode
 * waits for the key-share lock a write referencing the user takes.
 */
async function stillWanted(tx: DbClient, userId: string, requestedAt: Date, mode: "batch" | "last"): Promise<boolean> {
  const rows =
    mode === "batch"
      ? await tx.$queryRaw<unknown[]>`SELECT 1 FROM users WHERE id = ${userId}::uuid AND data_deletion_requested_at >= ${requestedAt} FOR SHARE`
      : await tx.$queryRaw<unknown[]>`SELECT 1 FROM users WHERE id = ${userId}::uuid AND data_deletion_requested_at >= ${requestedAt} FOR NO KEY UPDATE`;
  return rows.length > 0;
}

/**
 * Does (or finishes) the deletion the user asked for at `requestedAt`, then clears that mark in its last
 * transaction. Whatever was written to the account in between (a push into the personal hub, a config)
 * goes with it, as it does while the request runs. Run twice at once (the request and the sweep), the
 * batches wait for each other's rows and the second final transaction finds little left.
 *
 * Every transaction first checks, under the user's row lock, that the mark is still set: a sweep that
 * read it while the request ran went on after the request had cleared it, and deleted what the caller
 * wrote since. What goes is what the account holds when it runs, not only rows created before
 * `requestedAt`: a created_at says nothing of when a row came (an import carries its own, a config
 * synced again keeps its first), and a request once finished deletes nothing more. `finished` is false
 * when the mark was gone (cleared by another run, or given up by the sweep) and this run stopped, or
 * when `capped`: `maxBatches` batches went and memories are left, for the next sweep.
 */
export async function eraseAccountData(
  db: Db,
  userId: string,
  requestedAt: Date,
  options: { maxBatches?: number } = {},
): Promise<DeleteAccountDataResult & { finished: boolean; capped: boolean }> {
  // Renewed on a timer too, not only before each batch: after a batch commits its files go from the blob
  // store with no renewal, and a slow store (S3, Vercel Blob) outlasting the lease made this live run look
  // stopped, so a sweep took the deletion up under it, counted it and could give it up.
  // ACCOUNT_DELETION_LEASE_MS read here, not at load: the two modules import each other.
  let renewing: Promise<unknown> = Promise.resolve();
  const keepAlive = setInterval(() => {
    renewing = renewLease(db, userId, requestedAt).catch((error: unknown) => console.error(`[engram] account data: renewing the deletion lease of user ${userId} failed`, error));
  }, ACCOUNT_DELETION_LEASE_MS / 5);
  keepAlive.unref?.();
  try {
    const result = await eraseMarkedData(db, userId, requestedAt, options.maxBatches);
    if (result.capped) {
      // Cut at its cap of batches, not failed: its lease goes so the next sweep takes it up at once, and
      // its attempts start again, or an account larger than a few sweeps' worth was given up half emptied.
      clearInterval(keepAlive);
      await renewing;
      await db.$executeRaw`
        UPDATE users SET data_deletion_heartbeat_at = NULL, data_deletion_attempts = 0 WHERE id = ${userId}::uuid AND data_deletion_requested_at = ${requestedAt}`;
    }
    return result;
  } catch (error) {
    // A run that failed lets the lease go, so the next sweep takes the deletion up at once (and counts it):
    // after a renewal under way, which landing later took it back for five minutes.
    // Only its own mark's: a later request's lease is that request's run, still working on it.
    clearInterval(keepAlive);
    await renewing;
    await db.$executeRaw`UPDATE users SET data_deletion_heartbeat_at = NULL WHERE id = ${userId}::uuid AND data_deletion_requested_at = ${requestedAt}`.catch(() => undefined);
    throw error;
  } finally {
    clearInterval(keepAlive);
  }
}

async function eraseMarkedData(db: Db, userId: string, requestedAt: Date, maxBatches: number | undefined): Promise<DeleteAccountDataResult & { finished: boolean; capped: boolean }> {
  const personal = await db.hub.findFirst({ where: { ownerId: userId, hubType: "personal" }, select: { id: true } });
  // The memories go first, a bounded batch per transaction: all of them in the one transaction below
  // outlasted the transaction timeout for a large hub and failed on every attempt. What a push adds
  // meanwhile goes in that transaction, which also takes what cannot be batched.
  const purge = personal
    ? await deleteHubMemories(db, personal.id, { maxBatches, wanted: (tx) => stillWanted(tx, userId, requestedAt, "batch"), beforeBatch: () => renewLease(db, userId, requestedAt) })
    : { deleted: 0, done: true, batches: 0 };
  const purged = purge.deleted;
  const stopped = { deleted: true as const, memories: purged, topics: 0, configs: 0, sessions: 0, finished: false };
  // Memories left at the cap stay for the next run: the last transaction would take them all at once.
  if (!purge.done && maxBatches !== undefined && purge.batches >= maxBatches) return { ...stopped, capped: true };
  await renewLease(db, userId, requestedAt);
  const last = await db.$transaction(async (tx) => {
    // First, before the members lock and the memories: the order a batch takes them in.
    if (!(await stillWanted(tx, userId, requestedAt, "last"))) return null;
    let memories = purged;
    let topics = 0;
    let blobKeys: string[] = [];
    let boards: string[] = [];
    if (personal) {
      // Pushes under way finish first, then the memories are locked in id order (as a hub delete does).
      await lockHubMembers(tx, personal.id);
      await lockMemoriesOf(tx, personal.id);
      blobKeys = await detachUploads(tx, { hubId: personal.id });
      const late = await tx.$queryRaw<{ id: string }[]>`DELETE FROM memories WHERE hub_id = ${personal.id}::uuid RETURNING id::text AS id`;
      memories += late.length;
      // What other hubs' reviews and boards keep of them goes too, as in the batches (drop-memory-copies.ts).
      boards = await dropMemoryCopies(tx, late.map((row) => row.id), new Date());
      topics = (await tx.topic.deleteMany({ where: { hubId: personal.id } })).count;
      await tx.decisionGate.deleteMany({ where: { hubId: personal.id } });
      // Custom boards hold answers written from the memories (card, history, feedback cascade).
      await tx.customBoard.deleteMany({ where: { hubId: personal.id } });
      await tx.dreamRun.deleteMany({ where: { hubId: personal.id } });
    }
    const configs = (await tx.agentConfig.deleteMany({ where: { ownerId: userId } })).count;
    // Personas are configs: a default naming one now names nothing (a file synced again is a new config
    // with a new id), so the settings kept no longer name it.
    await tx.userSetting.updateMany({ where: { userId, chatDefaultPersonaId: { not: "" } }, data: { chatDefaultPersonaId: "" } });
    // A session file being written finishes first (its bytes are then among those deleted below), and
    // one written later waits for this deletion to commit and is stored whole after it: a write that
    // committed between this read and the delete left its new object in the store with no row.
    await lockForTransaction(tx, `agent-sessions:${userId}`);
    const sessionRows = await tx.agentSession.findMany({ where: { ownerId: userId }, select: { storeKey: true } });
    await tx.agentSession.deleteMany({ where: { ownerId: userId } });
    const sessionKeys = sessionRows.map((row) => row.storeKey);
    // Session files kept in the database go with their rows; the upload store's after the commit.
    await tx.agentSessionBlob.deleteMany({ where: { key: { in: sessionKeys.filter(isDatabaseSessionKey) } } });
    await tx.connectedAgent.deleteMany({ where: { ownerId: userId } });
    // Chats quote the hubs' memories; with their messages, stream logs and approvals (cascade).
    await tx.chatSession.deleteMany({ where: { ownerId: userId } });
    await tx.notification.deleteMany({ where: { userId } });
    await tx.topicVisit.deleteMany({ where: { userId } });
    // Uploads not attached (the personal hub's files are detached by now) are detached in this
    // transaction, so a push naming one from now on is refused instead of attaching a file whose bytes
    // are about to go. Detached, not deleted: with S3 or Vercel Blob their signed URLs still write for
    // their 15 minutes, and bytes landing after the removal below would be named by no row, found by no
    // sweep; removeBlobs keeps the row until the URL expired (the embedded store's goes at once).
    // One statement, whose RETURNING names exactly the rows it detached: a separate read first saw an
    // upload a concurrent push was attaching (to a team hub) as unattached, the write then skipped it once
    // that push committed, and its bytes were removed below from under the new memory.
    const unattached = await tx.$queryRaw<{ objectKey: string }[]>`
      UPDATE uploads SET created_at = ${detachedAt}, attached_at = NULL
       WHERE owner_id = ${userId}::uuid AND attached_at IS NULL RETURNING object_key AS "objectKey"`;
    // Last: the events lock is one for the whole server, held to commit, so taken earlier every
    // event-writing request of every user waited for the rest of this deletion.
    if (personal) {
      await emitEvent(tx, [
        { type: "hub.updated", hubId: personal.id, actorId: userId, entityId: personal.id },
        { type: "topic.changed", hubId: personal.id, actorId: userId, entityId: personal.id },
      ]);
    }
    // A later request's mark stays: that deletion is its own to finish.
    await tx.$executeRaw`
      UPDATE users SET data_deletion_requested_at = NULL, data_deletion_attempts = 0, data_deletion_heartbeat_at = NULL
       WHERE id = ${userId}::uuid AND data_deletion_requested_at <= ${requestedAt}`;
    return { memories, topics, configs, sessions: sessionRows.length, blobKeys: [...new Set([...blobKeys, ...unattached.map((u) => u.objectKey)])], sessionKeys, boards };
  });
  if (!last) return { ...stopped, capped: false };
  const { blobKeys, sessionKeys, boards, ...counts } = last;
  for (const board of boards) kickCustomBoard(board);
  // Bytes go once the rows are gone (best effort: a file or session file left behind is unreachable,
  // its row gone, and logged).
  await removeBlobs(db, blobKeys);
  for (const key of sessionKeys.filter((k) => !isDatabaseSessionKey(k))) {
    await (await sessionStoreFor(db, key)).delete(key).catch((error: unknown) => console.error(`[engram] account data: deleting ${key} failed`, error));
  }
  return { deleted: true, ...counts, finished: true, capped: false };
}
