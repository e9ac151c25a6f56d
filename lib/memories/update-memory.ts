import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { canEditMemory } from "@/lib/api/permissions.ts";
import { classifyKind, classifyStability } from "@/lib/processing/classify-heuristic.ts";
import { afterMemoryWrite } from "@/lib/processing/after-memory-write.ts";
import { assertContentSize, contentHash } from "./create-memory.ts";
import { deriveTitle } from "./derive-title.ts";
import { findMemoryOrThrow } from "./find-memory.ts";
import type { UpdateMemoryBody } from "./memory-fields.ts";
import { serializeMemory } from "./serialize-memory.ts";
import { eventsStatement } from "@/lib/events/emit-event.ts";

/** Partial update; a content change bumps the version, re-hashes and re-processes. */
export async function updateMemory(ctx: AuthContext, id: string, input: UpdateMemoryBody) {
  if (input.content !== undefined) assertContentSize(input.content);
  const { memory, role } = await findMemoryOrThrow(ctx, id);
  if (!canEditMemory(role, memory.ownerId === ctx.user.id)) {
    throw new ApiError("forbidden", `Your role (${role}) does not allow editing this memory`);
  }
  if (input.state !== undefined && memory.state === "processing") {
    throw new ApiError("conflict", "The memory is still processing; its state can change once it is active");
  }
  const hash = input.content !== undefined ? contentHash(input.content) : memory.contentHash;
  const contentChanged = hash !== memory.contentHash;
  const content = input.content ?? memory.content;
  const contentType = input.content_type ?? memory.contentType;
  const hint = input.hint ?? memory.hint;
  const reclassify = contentChanged || input.hint !== undefined || input.content_type !== undefined;
  const kindLocked = memory.kindLocked || input.kind !== undefined;
  const stabilityLocked = memory.stabilityLocked || input.stability !== undefined;
  const kind = input.kind ?? (reclassify && !kindLocked ? classifyKind(content, contentType, hint) : memory.kind);
  const stability =
    input.stability ?? (reclassify && !stabilityLocked ? classifyStability(content, kind, contentType, hint) : memory.stability);

  const [updated] = await ctx.db.$transaction([
    ctx.db.memory.update({
    where: { id: memory.id },
    data: {
      title: input.title ?? (memory.titleDerived && contentChanged ? deriveTitle(content) : memory.title),
      titleDerived: input.title !== undefined ? false : memory.titleDerived,
      content,
      contentHash: hash,
      contentType,
      tags: input.tags ?? memory.tags,
      hint,
      kind,
      kindLocked,
      stability,
      stabilityLocked,
      state: input.state ?? memory.state,
      ...(contentChanged && { version: { increment: 1 }, processingStatus: "pending", processingAttempts: 0, processingError: null }),
      updatedAt: ctx.now(),
    },
  }),
    eventsStatement(ctx.db, { type: "memory.updated", hubId: memory.hubId, actorId: ctx.user.id, entityId: memory.id }),
  ]);
  afterMemoryWrite(updated);
  return serializeMemory(updated);
}
