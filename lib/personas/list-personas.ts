import type { AuthContext } from "@/lib/api/context.ts";
import { isPersonaConfig, serializePersona } from "./persona-source.ts";

/**
 * GET /v1/personas: the caller's personas, read from their synced identity configs, newest change
 * first. The paths are read first (a user has at most 500 configs) and only personas' contents after.
 */
export async function listPersonas(ctx: AuthContext) {
  const candidates = await ctx.db.agentConfig.findMany({
    where: { ownerId: ctx.user.id, deletedAt: null },
    select: { id: true, filePath: true, deletedAt: true, version: true, personaHiddenVersion: true },
  });
  const ids = candidates.filter(isPersonaConfig).map((c) => c.id);
  const configs = ids.length ? await ctx.db.agentConfig.findMany({ where: { id: { in: ids } }, orderBy: [{ updatedAt: "desc" }, { id: "desc" }] }) : [];
  return { personas: configs.filter(isPersonaConfig).map(serializePersona) };
}
