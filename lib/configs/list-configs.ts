import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { isUuid } from "@/lib/ids.ts";
import type { ListQuery } from "@/lib/hubs/hub-fields.ts";
import { MAX_CONFIGS_PER_USER, MAX_VERSIONS_KEPT, type ListConfigsQuery } from "./config-fields.ts";
import { serializeConfig, serializeDeletedConfig } from "./serialize-config.ts";

/** Default page: the CLI lists without a cursor, so one page holds a typical account's files. */
export const DEFAULT_CONFIG_PAGE = 100;
const positionSchema = z.tuple([z.string(), z.string(), z.string(), z.uuid()]);
const deletedPositionSchema = z.tuple([z.iso.datetime(), z.uuid()]);

/**
 * Content one page of GET /v1/configs carries at most (one config always fits). Without it a page of
 * 500 files of 512 KiB was 256 MiB read at once, and its JSON, where a control character takes six
 * bytes, up to 1.5 GB: enough to take the server down for everybody.
 */
const MAX_PAGE_CONTENT_BYTES = 8 * 1024 * 1024;

/** GET /v1/configs: the caller's live configs (agent and scope narrow), by agent, path, scope; a page holds at most 8 MiB of content. */
export async function listConfigs(ctx: AuthContext, query: ListConfigsQuery) {
  const limit = parseLimit(query.limit, DEFAULT_CONFIG_PAGE, MAX_CONFIGS_PER_USER);
  const secret = await serverSecret(ctx.db);
  const list = `configs:${query.agent ?? ""}:${query.scope ?? ""}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, positionSchema) : undefined;
  const where = {
    ownerId: ctx.user.id,
    deletedAt: null,
    ...(query.agent && { agent: query.agent }),
    ...(query.scope && { scope: query.scope }),
    ...(after && {
      OR: [
        { agent: { gt: after[0] } },
        { agent: after[0], filePath: { gt: after[1] } },
        { agent: after[0], filePath: after[1], scope: { gt: after[2] } },
        { agent: after[0], filePath: after[1], scope: after[2], id: { gt: after[3] } },
      ],
    }),
  };
  const orderBy = [{ agent: "asc" as const }, { filePath: "asc" as const }, { scope: "asc" as const }, { id: "asc" as const }];
  // The page is cut by its content's size before any content is read.
  const heads = await ctx.db.agentConfig.findMany({ where, orderBy, take: limit + 1, select: { id: true, agent: true, filePath: true, scope: true, sizeBytes: true } });
  let count = 0;
  let bytes = 0;
  while (count < Math.min(limit, heads.length) && (count === 0 || bytes + heads[count]!.sizeBytes <= MAX_PAGE_CONTENT_BYTES)) bytes += heads[count++]!.sizeBytes;
  const rows = await ctx.db.agentConfig.findMany({ where: { ...where, id: { in: heads.slice(0, count).map((head) => head.id) } }, orderBy });
  const hasMore = heads.length > count;
  const last = heads[count - 1];
  return {
    configs: rows.map(serializeConfig),
    next_cursor: hasMore && last ? encodeCursor(secret, list, ctx.user.id, [last.agent, last.filePath, last.scope, last.id]) : "",
    has_more: hasMore,
  };
}

/** GET /v1/configs/:id: one live config of the caller, with its content. */
export async function getConfig(ctx: AuthContext, id: string) {
  const config = isUuid(id) ? await ctx.db.agentConfig.findFirst({ where: { id, ownerId: ctx.user.id, deletedAt: null } }) : null;
  if (!config) throw new ApiError("not_found", "Config not found");
  return serializeConfig(config);
}

/** GET /v1/configs/deleted: deletion records whose content can still be restored, newest deletion first. */
export async function listDeletedConfigs(ctx: AuthContext, query: ListQuery) {
  const limit = parseLimit(query.limit, DEFAULT_CONFIG_PAGE);
  const secret = await serverSecret(ctx.db);
  const after = query.cursor ? decodeCursor(secret, "configs:deleted", ctx.user.id, query.cursor, deletedPositionSchema) : undefined;
  const rows = await ctx.db.agentConfig.findMany({
    where: {
      ownerId: ctx.user.id,
      deletedAt: { not: null },
      contentExpiresAt: { gt: ctx.now() },
      ...(after && { OR: [{ deletedAt: { lt: new Date(after[0]) } }, { deletedAt: new Date(after[0]), id: { lt: after[1] } }] }),
    },
    orderBy: [{ deletedAt: "desc" }, { id: "desc" }],
    // Not the content: the list shows its hash only.
    select: { id: true, agent: true, filePath: true, scope: true, version: true, deletedAt: true, contentHash: true, contentExpiresAt: true },
    take: limit + 1,
  });
  const result = page("configs", rows, limit, (last) => encodeCursor(secret, "configs:deleted", ctx.user.id, [last.deletedAt!.toISOString(), last.id]));
  return { ...result, configs: result.configs.map(serializeDeletedConfig) };
}

/** GET /v1/configs/:id/versions: the stored versions of one config, newest first, without content. */
export async function listConfigVersions(ctx: AuthContext, id: string, query: ListQuery) {
  const config = isUuid(id) ? await ctx.db.agentConfig.findFirst({ where: { id, ownerId: ctx.user.id }, select: { id: true } }) : null;
  if (!config) throw new ApiError("not_found", "Config not found");
  // One default page holds every kept version.
  const limit = parseLimit(query.limit, MAX_VERSIONS_KEPT);
  const secret = await serverSecret(ctx.db);
  const list = `configs:versions:${id}`;
  const before = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, z.int()) : undefined;
  // The size is read in SQL: octet_length reads a stored value's length without fetching it, so a
  // page costs its metadata, not up to 100 × 512 KiB of content.
  const rows = await ctx.db.$queryRaw<{ version: number; contentHash: string; sizeBytes: number; deviceId: string | null; createdAt: Date }[]>`
    SELECT version, content_hash AS "contentHash", octet_length(content)::int AS "sizeBytes", device_id AS "deviceId", created_at AS "createdAt"
    FROM agent_config_versions
    WHERE config_id = ${id}::uuid AND (${before ?? null}::int IS NULL OR version < ${before ?? null}::int)
    ORDER BY version DESC
    LIMIT ${limit + 1}`;
  const result = page("versions", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, last.version));
  return {
    ...result,
    versions: result.versions.map((row) => ({ version: row.version, content_hash: row.contentHash, size_bytes: row.sizeBytes, device_id: row.deviceId, created_at: row.createdAt.toISOString() })),
  };
}
