import type { AuthContext } from "@/lib/api/context.ts";
import type { SqlRunner } from "@/lib/db/database.ts";
import { membershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { serializeTopic, type TopicRow } from "./serialize-topic.ts";
import { MAX_TOPICS_PER_HUB } from "./topic-fields.ts";

export type TopicTree = ReturnType<typeof serializeTopic> & { total_memory_count: number; children: TopicTree[] };

/** Siblings in the order people arrange them: position, then name, then id. */
export function bySiblingOrder(a: TopicRow, b: TopicRow): number {
  return a.position - b.position || a.name.localeCompare(b.name) || a.id.localeCompare(b.id);
}

/**
 * One hub's active topics as a tree, with memories per topic (`memory_count`)
 * and per branch (`total_memory_count`), and the hub's memories without a
 * topic (`unassigned_count`). Whole, not paginated: a hub holds at most 500
 * topics, nested at most 5 deep. Archived branches are left out
 * (GET /v1/topics/archived lists them).
 */
export async function listTopics(ctx: AuthContext, hubId: string) {
  const { hub } = await membershipOrThrow(ctx, hubId);
  const { rows, counts, unassigned } = await topicsWithCounts(ctx.sql, hub.id);
  const byParent = new Map<string | null, TopicRow[]>();
  const ids = new Set(rows.map((row) => row.id));
  for (const row of rows) {
    // A parent that is gone or archived cannot hide an active topic: it shows at the root.
    const parent = row.parentId && ids.has(row.parentId) ? row.parentId : null;
    byParent.set(parent, [...(byParent.get(parent) ?? []), row]);
  }
  const build = (parent: string | null, seen: Set<string>): TopicTree[] =>
    (byParent.get(parent) ?? [])
      .filter((row) => !seen.has(row.id))
      .sort(bySiblingOrder)
      .map((row) => {
        const children = build(row.id, new Set([...seen, row.id]));
        const own = counts.get(row.id) ?? 0;
        return { ...serializeTopic(row, own), total_memory_count: own + children.reduce((sum, child) => sum + child.total_memory_count, 0), children };
      });
  return { topics: build(null, new Set()), unassigned_count: unassigned };
}

/**
 * The hub's active topics, their memories, and the memories shown with no topic (the inbox, and those
 * still filed under a topic being deleted: they show none), in one statement, so of one snapshot. Read
 * apart, a delete's first batch committing in between showed its topic with its memories and counted
 * them again with no topic, or counted them nowhere.
 */
async function topicsWithCounts(sql: SqlRunner, hubId: string): Promise<{ rows: TopicRow[]; counts: Map<string, number>; unassigned: number }> {
  const found = await sql.query<TopicSqlRow & { inbox: number; memories: number }>(
    `SELECT i.inbox, t.id::text AS id, t.hub_id::text AS hub_id, t.name, t.created_by::text AS created_by, t.created_at, t.updated_at,
            t.parent_id::text AS parent_id, t.description, t.icon, t.position, t.pinned, t.user_modified, t.deleting_at, COALESCE(su.memories, 0)::int AS memories
       FROM (SELECT COALESCE((SELECT memories FROM storage_usage WHERE scope = 'inbox' AND scope_id = $1::uuid), 0)::int AS inbox) i
       LEFT JOIN (topics t LEFT JOIN storage_usage su ON su.scope = 'topic' AND su.scope_id = t.id)
         ON t.hub_id = $1::uuid AND (t.archived_at IS NULL OR t.deleting_at IS NOT NULL)
      ORDER BY t.deleting_at IS NOT NULL, t.id
      LIMIT $2::int`,
    // A hub holds at most MAX_TOPICS_PER_HUB topics, those being deleted included; the active ones first.
    [hubId, MAX_TOPICS_PER_HUB],
  );
  const rows: TopicRow[] = [];
  const counts = new Map<string, number>();
  let unassigned = Number(found[0]?.inbox ?? 0);
  for (const row of found) {
    if (row.id === null) continue;
    if (row.deleting_at !== null) {
      unassigned += Number(row.memories);
      continue;
    }
    counts.set(row.id, Number(row.memories));
    rows.push({
      id: row.id,
      hubId: row.hub_id,
      name: row.name,
      createdBy: row.created_by,
      createdAt: new Date(row.created_at),
      updatedAt: new Date(row.updated_at),
      parentId: row.parent_id,
      description: row.description,
      icon: row.icon,
      position: Number(row.position),
      pinned: row.pinned,
      userModified: row.user_modified,
      // Active: neither archived nor being deleted (so unclaimed: a claim comes only with deleting_at).
      archivedAt: null,
      deletingAt: null,
      deletingClaim: null,
    });
  }
  return { rows, counts, unassigned };
}

/** A topic as topicsWithCounts reads it (node-postgres gives timestamps as Date, PGlite as Date or text); all null without topics. */
interface TopicSqlRow {
  id: string;
  hub_id: string;
  name: string;
  created_by: string | null;
  created_at: Date | string;
  updated_at: Date | string;
  parent_id: string | null;
  description: string;
  icon: string;
  position: number;
  pinned: boolean;
  user_modified: boolean;
  deleting_at: Date | string | null;
}
