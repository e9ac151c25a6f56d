import type { DbClient } from "@/lib/db/database.ts";

/** A storage_usage counter: a hub's, a topic's, a hub's inbox (memories without a topic) or an owner's. */
export interface UsageCounterKey {
  scope: "hub" | "inbox" | "topic" | "user";
  id: string;
}

/**
 * Locks these counters for the rest of the transaction, in the order the memories triggers take
 * them (scope, then id: migration 20261126190000_topic_memory_counts), creating missing ones at zero.
 * A statement changing one memory takes its counters in that order, but a transaction changing
 * several memories one statement at a time takes them row after row: two batch moves gathering
 * memories of the same two hubs in opposite orders each held one hub's counter and waited for the
 * other's (a deadlock, tests/races.test.ts). Taking the whole batch's counters first, after its
 * memory rows, removes the cycle; the triggers then find them already held.
 */
export async function lockUsageCounters(tx: DbClient, keys: UsageCounterKey[]): Promise<void> {
  if (keys.length === 0) return;
  // A deleted topic keeps no counter (the topics delete trigger), so none is created for it here.
  await tx.$executeRaw`
    INSERT INTO storage_usage AS u (scope, scope_id, bytes, memories)
    SELECT k.scope, k.scope_id, 0, 0 FROM unnest(${keys.map((key) => key.scope)}::text[], ${keys.map((key) => key.id)}::uuid[]) AS k(scope, scope_id)
    WHERE k.scope <> 'topic' OR EXISTS (SELECT FROM topics t WHERE t.id = k.scope_id)
    GROUP BY k.scope, k.scope_id
    ORDER BY k.scope, k.scope_id
    ON CONFLICT (scope, scope_id) DO UPDATE SET memories = u.memories`;
}
