import type { AuthContext } from "@/lib/api/context.ts";
import { findPersonaOrThrow } from "./persona-source.ts";

/**
 * DELETE /v1/personas/{id}: the persona goes from the list; its config file stays as it is (Memax's
 * rule). It comes back when the file changes, as a persona read from the new content.
 */
export async function deletePersona(ctx: AuthContext, id: string) {
  const config = await findPersonaOrThrow(ctx.db, ctx.user.id, id);
  await ctx.db.agentConfig.updateMany({ where: { id: config.id, version: config.version }, data: { personaHiddenVersion: config.version } });
  return { deleted: true };
}
