import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { Attachment } from "@/lib/db/generated/client.ts";
import { isUuid } from "@/lib/ids.ts";
import { findMemoryOrThrow } from "@/lib/memories/find-memory.ts";

/** An attachment of a memory the caller can read; anything else is not found. */
export async function findAttachmentOrThrow(ctx: Pick<AuthContext, "db" | "user" | "credential">, memoryId: string, attachmentId: string): Promise<Attachment> {
  const { memory } = await findMemoryOrThrow(ctx, memoryId);
  const attachment = isUuid(attachmentId) ? await ctx.db.attachment.findFirst({ where: { id: attachmentId, memoryId: memory.id } }) : null;
  if (!attachment) throw new ApiError("not_found", "Attachment not found");
  return attachment;
}
