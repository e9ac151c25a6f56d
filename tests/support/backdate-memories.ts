import type { Database } from "@/lib/db/database.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";

/**
 * Writes memories' timestamps as a fixture needs them (stale for a dream, an event lost an hour ago).
 * Every real update that sets updated_at moves it past the stored one (the memories_updated_at_forward
 * trigger), so a fixture setting it back goes around the triggers, in its own transaction only, as a
 * replica applying rows would. A memory backdated as last written then had its text written then too
 * (content_changed_at), unless the fixture says otherwise.
 */
export async function backdateMemories(db: Database["prisma"], ids: string | string[], data: Prisma.MemoryUpdateManyMutationInput): Promise<void> {
  await db.$transaction(async (tx) => {
    await tx.$executeRaw`SET LOCAL session_replication_role = replica`;
    const written = data.updatedAt !== undefined && data.contentChangedAt === undefined ? { ...data, contentChangedAt: data.updatedAt } : data;
    await tx.memory.updateMany({ where: { id: { in: typeof ids === "string" ? [ids] : ids } }, data: written });
  });
}
