import type { Database } from "@/lib/db/database.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";

/**
 * Writes memories' timestamps as a fixture needs them (stale for a dream, an event lost an hour ago).
 * Every real update that sets updated_at moves it past the stored one (the memories_updated_at_forward
 * trigger), so a fixture setting it back goes around the triggers, in its own transaction only, as a
 * replica applying rows would.
 */
export async function backdateMemories(db: Database["prisma"], ids: string | string[], data: Prisma.MemoryUpdateManyMutationInput): Promise<void> {
  await db.$transaction(async (tx) => {
    await tx.$executeRaw`SET LOCAL session_replication_role = replica`;
    await tx.memory.updateMany({ where: { id: { in: typeof ids === "string" ? [ids] : ids } }, data });
  });
}
