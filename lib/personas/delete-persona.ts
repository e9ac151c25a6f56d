import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockConfigKey } from "@/lib/configs/upsert-config.ts";
import { findPersonaOrThrow, isPersonaConfig, personaHead } from "./persona-source.ts";

/**
 * DELETE /v1/personas/{id}: the persona goes from the list; its config file stays as it is (Memax's
 * rule). It comes back when the file changes, as a persona read from the new content.
 */
export async function deletePersona(ctx: AuthContext, id: string) {
  const config = await findPersonaOrThrow(ctx.db, ctx.user.id, id);
  await ctx.db.$transaction(async (tx) => {
    // Under the file's lock and re-read there: hiding the version read before it, a restore or push
    // committed meanwhile made the hide match nothing, yet it answered deleted and the persona stayed.
    await lockConfigKey(tx, config.ownerId, config.agent, config.filePath, config.scope);
    // Gone meanwhile: an account-data deletion removes configs without this lock.
    const current = await tx.agentConfig.findUnique({ where: { id: config.id }, select: personaHead });
    if (!current || !isPersonaConfig(current)) throw new ApiError("not_found", "Persona not found");
    // updateMany: update would return the row, content and all.
    await tx.agentConfig.updateMany({ where: { id: current.id }, data: { personaHiddenVersion: current.version } });
  });
  return { deleted: true };
}
