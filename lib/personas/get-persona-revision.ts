import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { AgentConfigVersion } from "@/lib/db/generated/client.ts";
import { serializeRevision } from "./list-persona-revisions.ts";
import { findPersonaOrThrow } from "./persona-source.ts";

/** A stored version of a persona's file by number; a version never stored or already pruned is not found. */
export async function findRevisionOrThrow(ctx: AuthContext, id: string, version: string): Promise<AgentConfigVersion> {
  const config = await findPersonaOrThrow(ctx.db, ctx.user.id, id);
  const number = /^\d{1,9}$/.test(version) ? Number(version) : NaN;
  const revision = Number.isInteger(number) ? await ctx.db.agentConfigVersion.findUnique({ where: { configId_version: { configId: config.id, version: number } } }) : null;
  if (!revision) throw new ApiError("not_found", "Revision not found");
  return revision;
}

/** GET /v1/personas/{id}/revisions/{version}: one revision with its content. */
export async function getPersonaRevision(ctx: AuthContext, id: string, version: string) {
  return serializeRevision(ctx.user.id, await findRevisionOrThrow(ctx, id, version), true);
}
