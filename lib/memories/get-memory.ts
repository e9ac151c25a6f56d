import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { memoryAccessWhere } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { recentOpens } from "./recent-opens.ts";
import { serializeMemoryWithContent } from "./serialize-memory.ts";

/**
 * One memory with content and attachments; reading it counts as an access. `countAccess: false`
 * (a HEAD, which runs this GET but shows nothing) only looks.
 */
export async function getMemory(ctx: AuthContext, id: string, options: { countAccess?: boolean } = {}) {
  const counted = options.countAccess ?? true;
  const where = { id, ...memoryAccessWhere(ctx) };
  const memory = !isUuid(id)
    ? undefined
    : counted
      ? (await ctx.db.memory.updateManyAndReturn({ where, data: { accessCount: { increment: 1 }, lastAccessedAt: ctx.now() } }))[0]
      : await ctx.db.memory.findFirst({ where });
  if (!memory) throw new ApiError("not_found", "Memory not found");
  // A view signalled right after this read (POST …/access) is the same open.
  if (counted) recentOpens.remember(ctx.user.id, memory.id, ctx.now());
  const attachments = await ctx.db.attachment.findMany({ where: { memoryId: memory.id }, orderBy: { createdAt: "asc" } });
  return serializeMemoryWithContent({ ...memory, attachments });
}
