import type { AuthContext } from "@/lib/api/context.ts";
import { parseLimit } from "@/lib/api/pagination.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, type BarSearchQuery } from "./recall-fields.ts";
import { searchMemories, type SearchResult } from "./search-memories.ts";

export interface BarSearchResult {
  query: string;
  memories: SearchResult[];
  topics: { id: string; name: string; description?: string; hub_id: string }[];
  hubs: { id: string; name: string }[];
}

/**
 * GET /v1/bar/search: the quick matches a search bar shows before Enter, in one request. Memories
 * come from the quick search (same scope: hub_id or X-Hub-ID, topic_id); topics of the searched hubs
 * and hubs the caller can read are matched by name (topics by description too), case-insensitively.
 * Hubs ignore the hub scope: they are where the bar jumps to. `limit` bounds each list.
 */
export async function barSearch(ctx: AuthContext, query: BarSearchQuery): Promise<BarSearchResult> {
  const q = query.q ?? "";
  const limit = parseLimit(query.limit, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT);
  if (q === "") return { query: q, memories: [], topics: [], hubs: [] };

  // searchMemories checks hub_id / X-Hub-ID (format and membership) before anything else is read.
  const memories = await searchMemories(ctx, { ...query, q });
  const scopedHubId = query.hub_id ?? ctx.hubHeader;
  const readable = await readableHubs(ctx);
  const hubIds = scopedHubId ? [scopedHubId] : readable.map((m) => m.hub.id);
  const needle = q.toLowerCase();

  const pattern = `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const topics = await ctx.sql.query<{ id: string; name: string; description: string; hub_id: string }>(
    `SELECT id, name, description, hub_id FROM topics
      WHERE hub_id = ANY($1::uuid[]) AND archived_at IS NULL AND deleting_at IS NULL AND (name ILIKE $2 ESCAPE '\\' OR description ILIKE $2 ESCAPE '\\')
      ORDER BY (lower(name) = $3) DESC, starts_with(lower(name), $3) DESC, (name ILIKE $2 ESCAPE '\\') DESC, lower(name), id
      LIMIT $4`,
    [hubIds, pattern, needle, limit],
  );
  const hubs = readable
    .map((m) => m.hub)
    .filter((hub) => hub.name.toLowerCase().includes(needle))
    .sort((a, b) => rank(a.name, needle) - rank(b.name, needle) || a.name.localeCompare(b.name) || a.id.localeCompare(b.id))
    .slice(0, limit);

  return {
    query: q,
    memories,
    topics: topics.map((t) => ({ id: t.id, name: t.name, ...(t.description && { description: t.description }), hub_id: t.hub_id })),
    hubs: hubs.map((hub) => ({ id: hub.id, name: hub.name })),
  };
}

/** 0 for an exact name, 1 for a name starting with the text, 2 for one merely containing it. */
function rank(name: string, needle: string): number {
  const lower = name.toLowerCase();
  return lower === needle ? 0 : lower.startsWith(needle) ? 1 : 2;
}
