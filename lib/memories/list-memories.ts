import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { hubScopeWithCounts } from "@/lib/hubs/hub-access.ts";
import { memoryCounts } from "@/lib/quotas/memory-counts.ts";
import type { ListMemoriesQuery } from "./memory-fields.ts";
import { memoryObjectRows } from "./memory-object-rows.ts";
import { serializeMemory } from "./serialize-memory.ts";

/**
 * Up to this many hubs, a list across hubs reads each hub's page from its (hub_id, order) index, one
 * LATERAL walk per hub within one statement. PostgreSQL cannot read that index in order for
 * `hub_id IN (...)`: it would sort every memory of those hubs for each page (16 ms at 10k memories in
 * 5 hubs on PostgreSQL 15, against about 0.2 ms per hub). Past it, the plain statement again, so a
 * page never costs more than this many walks.
 */
const PER_HUB_WALKS_MAX = 20;

type Key = { id: string; createdAt: Date; accessCount: number };

// A position ends with the total its first page counted (absent in cursors made before it was carried).
const carriedTotal = z.int().min(0).optional();
const newestPosition = z.tuple([z.iso.datetime(), z.uuid(), carriedTotal]);
const relevantPosition = z.tuple([z.int().min(0), z.iso.datetime(), z.uuid(), carriedTotal]);

/**
 * Memories of every hub the caller can read (or one: hub_id, else the X-Hub-ID header),
 * filtered by kind, topic, creation time and pusher; keyset-paginated. With a filter, `total` is
 * what the first page counted, carried in the cursor: that count reads every matching row, and a
 * client walking the list (Memax's `list --all`) paid it again on each page.
 */
export async function listMemories(ctx: AuthContext, query: ListMemoriesQuery) {
  const limit = parseLimit(query.limit);
  const { hubIds, memories: hubCounts } = await hubScopeWithCounts(ctx, query.hub_id);
  const secret = await serverSecret(ctx.db);
  // The list a cursor belongs to is its sort, hub scope and filters: a cursor carried over to another
  // hub or filter would go on from a position of a list it never saw (skipping what is newer there).
  const instant = (time: string | undefined) => (time ? new Date(time).toISOString() : "");
  const list = `memories:${JSON.stringify([
    query.sort,
    (query.hub_id ?? ctx.hubHeader) === undefined ? "all" : hubIds[0],
    query.topic_id ?? "",
    query.kind ?? "",
    query.actor ?? "",
    instant(query.created_after),
    instant(query.created_before),
  ])}`;

  const scope: Prisma.MemoryWhereInput = {
    hubId: { in: hubIds },
    // A topic being deleted is not_found to every read, and its memories show no topic: filtering on it
    // finds nothing, as filtering on a topic that does not exist does (listConditions alike).
    ...(query.topic_id !== undefined && { topicId: query.topic_id, topic: { deletingAt: null } }),
    ...(query.kind && { kind: query.kind }),
    ...(query.actor && { ownerId: query.actor }),
    // [created_after, created_before), as recall reads them (engram_recall_candidates and engram_lexical_search).
    ...((query.created_after || query.created_before) && {
      createdAt: {
        ...(query.created_after && { gte: new Date(query.created_after) }),
        ...(query.created_before && { lt: new Date(query.created_before) }),
      },
    }),
  };
  let position: Key | undefined;
  let carried: number | undefined;
  if (query.cursor) {
    if (query.sort === "relevant") {
      const [accessCount, createdAt, id, total] = decodeCursor(secret, list, ctx.user.id, query.cursor, relevantPosition);
      position = { accessCount, createdAt: new Date(createdAt), id };
      carried = total;
    } else {
      const [createdAt, id, total] = decodeCursor(secret, list, ctx.user.id, query.cursor, newestPosition);
      position = { accessCount: 0, createdAt: new Date(createdAt), id };
      carried = total;
    }
  }
  // With no filter but the hubs, the total is their trigger-kept counters rather than a count of their
  // rows, cheap enough to read fresh on every page (across every hub, they came with the scope).
  const counted =
    Object.keys(scope).length === 1
      ? (hubCounts ? Promise.resolve(hubCounts) : memoryCounts(ctx.sql, "hub", hubIds)).then((counts) => [...counts.values()].reduce((sum, n) => sum + n, 0))
      : carried !== undefined
        ? Promise.resolve(carried)
        : ctx.db.memory.count({ where: scope });
  // The next page's cursor carries the total, so it is made once the count (run alongside the page) is in.
  const cursorFor = counted.then(
    (total) => (last: Key) =>
      encodeCursor(
        secret,
        list,
        ctx.user.id,
        query.sort === "relevant" ? [last.accessCount, last.createdAt.toISOString(), last.id, total] : [last.createdAt.toISOString(), last.id, total],
      ),
  );
  // A failed count is thrown by the Promise.all below; this copy of it must not go unhandled.
  cursorFor.catch(() => {});

  // One statement whatever the number of hubs: a query per hub sent at once held one PostgreSQL pool
  // connection per hub (up to 20) for a single request, and other requests waited for the pool meanwhile.
  const [result, total] = await Promise.all([
    hubIds.length > 1 && hubIds.length <= PER_HUB_WALKS_MAX
      ? pageAcrossHubs(ctx, hubIds, query, position, limit, cursorFor)
      : pageOfHubs(ctx, hubIds, query, position, limit).then(async (rows) => page("memories", rows, limit, await cursorFor)),
    counted,
  ]);
  return { ...result, memories: result.memories.map(serializeMemory), total };
}

/**
 * A page across several hubs in one statement: a walk of each hub's (hub_id, order) index, LATERAL,
 * merged by PostgreSQL in the same order and with the same cursor as the one-hub statement. It reads
 * the keys only; the page's rows follow by id, and has_more and the cursor come from the keys, so a
 * memory deleted in between only shortens the page.
 */
async function pageAcrossHubs(
  ctx: AuthContext,
  hubIds: string[],
  query: ListMemoriesQuery,
  position: Key | undefined,
  limit: number,
  cursorFor: Promise<(last: Key) => string>,
) {
  const { params, param, conditions, order } = listConditions(hubIds, "m.hub_id = h.hub_id", query, position);
  const take = param(limit + 1, "int");
  const keys = await ctx.sql.query<{ id: string; created_at: Date | string; access_count: number }>(
    `SELECT w.id, w.created_at, w.access_count
       FROM unnest($1::uuid[]) AS h(hub_id)
       CROSS JOIN LATERAL (
         SELECT m.id, m.created_at, m.access_count FROM memories m
          WHERE ${conditions.join(" AND ")}
          ORDER BY ${order("m")} LIMIT ${take}
       ) w
      ORDER BY ${order("w")} LIMIT ${take}`,
    params,
  );
  const keyed = page(
    "memories",
    keys.map((key): Key => ({ id: key.id, createdAt: new Date(key.created_at), accessCount: Number(key.access_count) })),
    limit,
    await cursorFor,
  );
  const rows = await memoryObjectRows(ctx.sql, "WHERE m.id = ANY($1::uuid[]) AND m.hub_id = ANY($2::uuid[])", [keyed.memories.map((key) => key.id), hubIds]);
  const byId = new Map(rows.map((row) => [row.id, row]));
  return { ...keyed, memories: keyed.memories.flatMap((key) => byId.get(key.id) ?? []) };
}

/**
 * A list's conditions as SQL on `m` (memories), in the list's order: its hubs (`hubCondition`, hub ids
 * are $1), filters and cursor position, the same for the one-statement page and the per-hub walks.
 */
function listConditions(hubIds: string[], hubCondition: string, query: ListMemoriesQuery, position: Key | undefined) {
  const params: unknown[] = [hubIds];
  const param = (value: unknown, type: string) => `$${params.push(value)}::${type}`;
  const conditions = [hubCondition];
  if (query.topic_id !== undefined) {
    // Evaluated once per statement (it names no column of m): a topic being deleted matches nothing.
    const topic = param(query.topic_id, "uuid");
    conditions.push(`m.topic_id = ${topic}`, `NOT EXISTS (SELECT 1 FROM topics t WHERE t.id = ${topic} AND t.deleting_at IS NOT NULL)`);
  }
  if (query.kind) conditions.push(`m.kind = ${param(query.kind, "text")}`);
  if (query.actor) conditions.push(`m.owner_id = ${param(query.actor, "uuid")}`);
  if (query.created_after) conditions.push(`m.created_at >= ${param(new Date(query.created_after).toISOString(), "timestamptz")}`);
  if (query.created_before) conditions.push(`m.created_at < ${param(new Date(query.created_before).toISOString(), "timestamptz")}`);
  const columns = query.sort === "relevant" ? ["access_count", "created_at", "id"] : ["created_at", "id"];
  if (position) {
    const at = [param(position.createdAt.toISOString(), "timestamptz"), param(position.id, "uuid")];
    if (query.sort === "relevant") at.unshift(param(position.accessCount, "int"));
    conditions.push(`(${columns.map((c) => `m.${c}`).join(", ")}) < (${at.join(", ")})`);
  }
  const order = (alias: string) => columns.map((c) => `${alias}.${c} DESC`).join(", ");
  return { params, param, conditions, order };
}

/** A page of one hub's memories (or of more hubs than PER_HUB_WALKS_MAX) in one plain statement. */
async function pageOfHubs(ctx: AuthContext, hubIds: string[], query: ListMemoriesQuery, position: Key | undefined, limit: number) {
  const { params, param, conditions, order } = listConditions(hubIds, "m.hub_id = ANY($1::uuid[])", query, position);
  return memoryObjectRows(ctx.sql, `WHERE ${conditions.join(" AND ")} ORDER BY ${order("m")} LIMIT ${param(limit + 1, "int")}`, params);
}
