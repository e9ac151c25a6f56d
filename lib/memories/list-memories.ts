import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { readableHubs, membershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import type { ListMemoriesQuery } from "./memory-fields.ts";
import { serializeMemory } from "./serialize-memory.ts";

const newestPosition = z.tuple([z.iso.datetime(), z.uuid()]);
const relevantPosition = z.tuple([z.int().min(0), z.iso.datetime(), z.uuid()]);

/**
 * Memories of every hub the caller can read (or one: hub_id, else the X-Hub-ID header),
 * filtered by kind, topic, creation time and pusher; keyset-paginated.
 */
export async function listMemories(ctx: AuthContext, query: ListMemoriesQuery) {
  const limit = parseLimit(query.limit);
  const hubId = query.hub_id ?? ctx.hubHeader;
  if (hubId !== undefined && !isUuid(hubId)) {
    const path = query.hub_id !== undefined ? "hub_id" : "X-Hub-ID";
    throw new ApiError("invalid_request", `${path} must be a hub id (not a slug)`, { issues: [{ path, message: "not a hub id" }] });
  }
  const hubIds = hubId
    ? [(await membershipOrThrow(ctx, hubId)).hub.id]
    : (await readableHubs(ctx)).map((membership) => membership.hub.id);
  const secret = await serverSecret(ctx.db);
  const list = `memories:${query.sort}`;

  const scope: Prisma.MemoryWhereInput = {
    hubId: { in: hubIds },
    ...(query.topic_id !== undefined && { topicId: isUuid(query.topic_id) ? query.topic_id : "00000000-0000-0000-0000-000000000000" }),
    ...(query.kind && { kind: query.kind }),
    ...(query.actor && { ownerId: query.actor }),
    ...((query.created_after || query.created_before) && {
      createdAt: {
        ...(query.created_after && { gt: new Date(query.created_after) }),
        ...(query.created_before && { lt: new Date(query.created_before) }),
      },
    }),
  };
  let after: Prisma.MemoryWhereInput | undefined;
  if (query.cursor) {
    if (query.sort === "relevant") {
      const [count, createdAt, id] = decodeCursor(secret, list, ctx.user.id, query.cursor, relevantPosition);
      const at = new Date(createdAt);
      after = {
        OR: [
          { accessCount: { lt: count } },
          { accessCount: count, createdAt: { lt: at } },
          { accessCount: count, createdAt: at, id: { lt: id } },
        ],
      };
    } else {
      const [createdAt, id] = decodeCursor(secret, list, ctx.user.id, query.cursor, newestPosition);
      const at = new Date(createdAt);
      after = { OR: [{ createdAt: { lt: at } }, { createdAt: at, id: { lt: id } }] };
    }
  }
  const orderBy: Prisma.MemoryOrderByWithRelationInput[] =
    query.sort === "relevant"
      ? [{ accessCount: "desc" }, { createdAt: "desc" }, { id: "desc" }]
      : [{ createdAt: "desc" }, { id: "desc" }];

  const [rows, total] = await Promise.all([
    ctx.db.memory.findMany({ where: after ? { AND: [scope, after] } : scope, orderBy, take: limit + 1, omit: { content: true } }),
    ctx.db.memory.count({ where: scope }),
  ]);
  const result = page("memories", rows, limit, (last) =>
    encodeCursor(
      secret,
      list,
      ctx.user.id,
      query.sort === "relevant" ? [last.accessCount, last.createdAt.toISOString(), last.id] : [last.createdAt.toISOString(), last.id],
    ),
  );
  return { ...result, memories: result.memories.map(serializeMemory), total };
}
