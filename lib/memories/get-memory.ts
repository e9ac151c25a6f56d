import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { memoryAccessWhere } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { recentOpens } from "./recent-opens.ts";
import { serializeMemoryWithContent } from "./serialize-memory.ts";

/** One memory with content and attachments; reading it counts as an access. */
export async function getMemory(ctx: AuthContext, id: string) {
  const where = { id, ...memoryAccessWhere(ctx) };
  const updated = isUuid(id)
    ? await ctx.db.memory.updateManyAndReturn({ where, data: { accessCount: { increment: 1 }, lastAccessedAt: ctx.now() } })
    : [];
  const memory = updated[0];
  if (!memory) throw new ApiError("not_found", "Memory not found");
  // A view signalled right after this read (POST …/access) is the same open.
  recentOpens.remember(ctx.user.id, memory.id, ctx.now());
  const attachments = await ctx.db.attachment.findMany({ where: { memoryId: memory.id }, orderBy: { createdAt: "asc" } });
  return serializeMemoryWithContent({ ...memory, attachments });
}
