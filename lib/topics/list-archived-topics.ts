import type { AuthContext } from "@/lib/api/context.ts";
import { membershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { serializeTopic } from "./serialize-topic.ts";
import { MAX_TOPICS_PER_HUB } from "./topic-fields.ts";
import { topicMemoryCounts } from "./topic-memory-counts.ts";

/** A hub's archived topics, flat, most recently archived first (bounded by the 500-per-hub limit). */
export async function listArchivedTopics(ctx: AuthContext, hubId: string) {
  const { hub } = await membershipOrThrow(ctx, hubId);
  const rows = await ctx.db.topic.findMany({
    where: { hubId: hub.id, archivedAt: { not: null }, deletingAt: null },
    orderBy: [{ archivedAt: "desc" }, { id: "asc" }],
    take: MAX_TOPICS_PER_HUB,
  });
  const counts = await topicMemoryCounts(ctx.db, hub.id, rows.map((row) => row.id));
  return { topics: rows.map((row) => serializeTopic(row, counts.get(row.id) ?? 0)) };
}
