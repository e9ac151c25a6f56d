import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { membershipOrThrow, readableHubs } from "@/lib/hubs/hub-access.ts";
import { serializeTopic } from "./serialize-topic.ts";
import type { ListTopicsQuery } from "./topic-fields.ts";
import { topicMemoryCounts } from "./topic-memory-counts.ts";

const positionSchema = z.tuple([z.string(), z.uuid()]);

/** Topics of every hub the caller can read (or one, with hub_id), by name then id, with memory counts. */
export async function listTopics(ctx: AuthContext, query: ListTopicsQuery) {
  const limit = parseLimit(query.limit);
  const hubIds = query.hub_id
    ? [(await membershipOrThrow(ctx, query.hub_id)).hub.id]
    : (await readableHubs(ctx)).map((membership) => membership.hub.id);
  const secret = await serverSecret(ctx.db);
  // The scope is part of the list name, so a cursor of one hub's list is refused on another's.
  const list = `topics:${query.hub_id ?? "all"}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, positionSchema) : undefined;
  const rows = await ctx.db.topic.findMany({
    where: {
      hubId: { in: hubIds },
      ...(after && { OR: [{ name: { gt: after[0] } }, { name: after[0], id: { gt: after[1] } }] }),
    },
    orderBy: [{ name: "asc" }, { id: "asc" }],
    take: limit + 1,
  });
  const result = page("topics", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, [last.name, last.id]));
  const counts = await topicMemoryCounts(ctx.db, result.topics.map((topic) => topic.id));
  return { ...result, topics: result.topics.map((topic) => serializeTopic(topic, counts.get(topic.id) ?? 0)) };
}
