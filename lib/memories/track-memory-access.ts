import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { memoryAccessWhere } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { recentOpens } from "./recent-opens.ts";

/**
 * A deliberate view of a memory (Memax's `trackAccessed`): counts one access, unless the same
 * user's read of it was already counted within the last minute (a client that GETs the memory
 * and then signals the view has opened it once). `counted` tells which it was.
 */
export async function trackMemoryAccess(ctx: AuthContext, raw: string) {
  if (!isUuid(raw)) throw new ApiError("not_found", "Memory not found");
  // As stored (and as the GET remembered it): the same open named in capitals counted twice.
  const id = raw.toLowerCase();
  const now = ctx.now();
  const where = { id, ...memoryAccessWhere(ctx) };
  const select = { id: true, accessCount: true, lastAccessedAt: true, createdAt: true } as const;
  const counted = !recentOpens.has(ctx.user.id, id, now);
  const rows = counted
    ? await ctx.db.memory.updateManyAndReturn({ where, data: { accessCount: { increment: 1 }, lastAccessedAt: now }, select })
    : await ctx.db.memory.findMany({ where, select, take: 1 });
  const memory = rows[0];
  if (!memory) throw new ApiError("not_found", "Memory not found");
  if (counted) recentOpens.remember(ctx.user.id, id, now);
  return {
    id: memory.id,
    access_count: memory.accessCount,
    accessed_at: (memory.lastAccessedAt ?? memory.createdAt).toISOString(),
    counted,
  };
}
