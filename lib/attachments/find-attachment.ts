import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { Attachment } from "@/lib/db/generated/client.ts";
import { memoryAccessWhere } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";

/**
 * An attachment of a memory the caller can read; anything else is not found. The access rule is a
 * condition on the memory, not a load of it: its text (megabytes for a long document) is not needed
 * to serve a file.
 */
export async function findAttachmentOrThrow(ctx: Pick<AuthContext, "db" | "user" | "credential">, memoryId: string, attachmentId: string): Promise<Attachment> {
  const attachment =
    isUuid(memoryId) && isUuid(attachmentId)
      ? await ctx.db.attachment.findFirst({ where: { id: attachmentId, memoryId, memory: memoryAccessWhere(ctx) } })
      : null;
  if (!attachment) throw new ApiError("not_found", "Attachment not found");
  return attachment;
}
