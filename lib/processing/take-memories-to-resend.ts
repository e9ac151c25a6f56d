import type { Db } from "@/lib/db/database.ts";
import { findPendingMemories } from "./embedded-runner.ts";
import type { ProcessingConfig } from "./processing-config.ts";

/**
 * With Inngest: the waiting memories whose event the sweep sends again, marked as re-sent now. A
 * memory's write sends its event, which Inngest holds until a run is free (4 at a time); re-sending it
 * on every sweep (each server's every 30 s, and the cron's) piled duplicate runs onto a backlog. So
 * an event is sent again only when a whole stale timeout has passed since the write or the last
 * re-send: it was lost, or its run died. The mark is taken with a conditional update, so sweeps
 * running at once each send a memory's event at most once between them.
 */
export async function takeMemoriesToResend(db: Db, config: Pick<ProcessingConfig, "staleMs" | "retryBaseMs">, now = new Date()): Promise<string[]> {
  const sentBefore = new Date(now.getTime() - config.staleMs);
  const ids = await findPendingMemories(db, { staleBefore: sentBefore, retryBaseMs: config.retryBaseMs, sentBefore, now });
  if (ids.length === 0) return [];
  const taken = await db.memory.updateManyAndReturn({
    where: { id: { in: ids }, OR: [{ processingQueuedAt: null }, { processingQueuedAt: { lt: sentBefore } }] },
    data: { processingQueuedAt: now },
    select: { id: true },
  });
  // In the order the queue gave them (oldest first): the update returns its rows in whatever order it
  // wrote them, which on PostgreSQL is not that one.
  const took = new Set(taken.map((row) => row.id));
  return ids.filter((id) => took.has(id));
}
