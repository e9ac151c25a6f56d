import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { cursorSchema, decodeCursor, encodeCursor, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { MAX_CONFIGS_PER_USER } from "@/lib/configs/config-fields.ts";
import { isPersonaConfig, serializePersona } from "./persona-source.ts";

/** GET /v1/personas: limit and cursor page (Memax's client lists without them: one default page holds a typical account's personas). */
export const listPersonasQuerySchema = z.object({ limit: z.string().optional(), cursor: cursorSchema.optional() });
export type ListPersonasQuery = z.output<typeof listPersonasQuerySchema>;

// Every persona the account can have, by default: Memax's personas.list() sends no cursor and before
// paging got them all; only the content cap below can end its page early.
const DEFAULT_PERSONA_PAGE = MAX_CONFIGS_PER_USER;
/**
 * Content one page carries at most (one persona always fits), as GET /v1/configs: every persona comes
 * with its content, and 500 configs of 512 KiB made one response of 256 MiB (and its JSON far more).
 */
export const MAX_PERSONA_PAGE_BYTES = 8 * 1024 * 1024;
const positionSchema = z.tuple([z.iso.datetime(), z.uuid()]);
const LIST = "personas";

/**
 * GET /v1/personas: the caller's personas, read from their synced identity configs, newest change
 * first. The paths and sizes are read first (a user has at most 500 configs); only the page's
 * contents after, the page cut by its content's size.
 */
export async function listPersonas(ctx: AuthContext, query: ListPersonasQuery = {}) {
  const limit = parseLimit(query.limit, DEFAULT_PERSONA_PAGE, MAX_CONFIGS_PER_USER);
  const secret = await serverSecret(ctx.db);
  const after = query.cursor ? decodeCursor(secret, LIST, ctx.user.id, query.cursor, positionSchema) : undefined;
  const candidates = await ctx.db.agentConfig.findMany({
    where: {
      ownerId: ctx.user.id,
      deletedAt: null,
      ...(after && { OR: [{ updatedAt: { lt: new Date(after[0]) } }, { updatedAt: new Date(after[0]), id: { lt: after[1] } }] }),
    },
    orderBy: [{ updatedAt: "desc" }, { id: "desc" }],
    select: { id: true, filePath: true, deletedAt: true, version: true, personaHiddenVersion: true, sizeBytes: true, updatedAt: true },
  });
  const heads = candidates.filter(isPersonaConfig);
  let count = 0;
  let bytes = 0;
  while (count < Math.min(limit, heads.length) && (count === 0 || bytes + heads[count]!.sizeBytes <= MAX_PERSONA_PAGE_BYTES)) bytes += heads[count++]!.sizeBytes;
  const ids = heads.slice(0, count).map((head) => head.id);
  const configs = ids.length ? await ctx.db.agentConfig.findMany({ where: { id: { in: ids } }, orderBy: [{ updatedAt: "desc" }, { id: "desc" }] }) : [];
  const last = heads[count - 1];
  const hasMore = heads.length > count;
  return {
    personas: configs.filter(isPersonaConfig).map(serializePersona),
    next_cursor: hasMore && last ? encodeCursor(secret, LIST, ctx.user.id, [last.updatedAt.toISOString(), last.id]) : "",
    has_more: hasMore,
  };
}
