import type { AuthContext } from "@/lib/api/context.ts";
import { isPersonaConfig, personaConfigWhere, serializePersona } from "./persona-source.ts";

/** GET /v1/personas: the caller's personas, read from their synced identity configs, newest change first (bounded by the config cap, 500). */
export async function listPersonas(ctx: AuthContext) {
  const configs = await ctx.db.agentConfig.findMany({
    where: { ownerId: ctx.user.id, ...personaConfigWhere },
    orderBy: [{ updatedAt: "desc" }, { id: "desc" }],
  });
  return { personas: configs.filter(isPersonaConfig).map(serializePersona) };
}
