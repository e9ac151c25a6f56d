import { hanGlossWords } from "@/lib/ai/gloss-han.ts";
import { topicsBeingDeleted } from "@/lib/topics/topics-being-deleted.ts";
import type { AuthContext } from "@/lib/api/context.ts";
import { parseLimit } from "@/lib/api/pagination.ts";
import { hubScopeIds } from "@/lib/hubs/hub-access.ts";
import { lexicalSearch, type LexicalHit } from "./lexical-search.ts";
import { SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, type SearchMemoriesQuery } from "./recall-fields.ts";

/** Memax's SearchResult: one row of a search box's quick matches. */
export interface SearchResult {
  memory_id: string;
  title: string;
  snippet: string;
  kind: string;
  stability: string;
  heading_chain?: string;
  hub_id: string;
  hub_name: string;
  topic_id?: string;
  topic_name?: string;
}

const SNIPPET_CHARS = 160;
/** Characters of context shown before the first match. */
const SNIPPET_LEAD = 40;
/**
 * How much of a memory's text a snippet is cut from when no chunk matched: a match further in shows
 * the opening instead. Processed memories match by chunk (about 1,200 characters each).
 */
const SNIPPET_SOURCE_CHARS = 20_000;

/**
 * GET /v1/memories/search: words, no embeddings (Memax's quick search). It ranks by BM25 over
 * chunks and unchunked memories, the same lexical leg recall fuses, one row per memory. A title
 * containing the text follows, so a half-typed word ("deplo") still finds "Deploy checklist".
 * It searches every readable hub (hub_id, else X-Hub-ID, narrows to one). It counts no access:
 * a snippet is not a read.
 */
export async function searchMemories(ctx: AuthContext, query: SearchMemoriesQuery): Promise<SearchResult[]> {
  const limit = parseLimit(query.limit, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT);
  const hubIds = await hubScopeIds(ctx, query.hub_id);
  if (hubIds.length === 0) return [];
  // A topic being deleted is not_found to every read: filtering on it finds nothing, as on one that does not exist.
  if (query.topic_id && (await topicsBeingDeleted(ctx.sql, hubIds, [query.topic_id])).size > 0) return [];

  const lexical = await lexicalSearch(
    ctx.sql,
    { userId: ctx.user.id, hubIds, text: `${query.q} ${await hanGlossWords(query.q)}`.trim() },
    { topicId: query.topic_id },
    limit * 3,
  );
  const best = new Map<string, LexicalHit>();
  for (const hit of [...lexical.hits].sort((a, b) => b.bm25 - a.bm25)) {
    if (!best.has(hit.memoryId) && best.size < limit) best.set(hit.memoryId, hit);
  }
  const titled = best.size < limit ? await titleMatches(ctx, hubIds, query, [...best.keys()], limit - best.size) : [];
  const ids = [...best.keys(), ...titled];
  if (ids.length === 0) return [];

  const chunkIds = [...best.values()].flatMap((hit) => (hit.chunkId ? [hit.chunkId] : []));
  // A row without a matched chunk (a title match, a memory not chunked yet) takes its snippet from the
  // memory's text: only its opening SNIPPET_SOURCE_CHARS. The whole text was read before, so a search
  // bar's keystroke over ten 3 MiB memories moved 30 MB out of the database (about a second each).
  const [memories, chunks, openings] = await Promise.all([
    ctx.db.memory.findMany({
      where: { id: { in: ids }, hubId: { in: hubIds }, state: "active" },
      select: { id: true, title: true, kind: true, stability: true, hubId: true, topicId: true, hub: { select: { name: true } }, topic: { select: { name: true, deletingAt: true } } },
    }),
    // A chunk of a memory an edit sent back to processing since the search is its old version's text.
    chunkIds.length
      ? ctx.db.chunk.findMany({
          where: { id: { in: chunkIds }, memory: { processingStatus: { notIn: ["pending", "running"] } } },
          select: { id: true, content: true, headingChain: true },
        })
      : [],
    memoryOpenings(ctx, hubIds, ids.filter((id) => !best.get(id)?.chunkId)),
  ]);
  const memoryById = new Map(memories.map((m) => [m.id, m]));
  const chunkById = new Map(chunks.map((c) => [c.id, c]));
  // A matched chunk replaced or outdated by reprocessing in between: that memory's opening instead (rare).
  const vanished = ids.filter((id) => {
    const chunkId = best.get(id)?.chunkId;
    return chunkId && !chunkById.has(chunkId);
  });
  for (const [id, text] of await memoryOpenings(ctx, hubIds, vanished)) openings.set(id, text);
  const words = searchWords(query.q);
  return ids.flatMap((id) => {
    const memory = memoryById.get(id);
    // Deleted or archived between the two reads.
    if (!memory) return [];
    const hit = best.get(id);
    const chunk = hit?.chunkId ? chunkById.get(hit.chunkId) : undefined;
    const text = chunk?.content ?? openings.get(id) ?? "";
    return [
      {
        memory_id: memory.id,
        title: memory.title,
        snippet: snippet(text, [...(hit?.matchedTerms ?? []), ...words]),
        kind: memory.kind,
        stability: memory.stability,
        ...(chunk?.headingChain && { heading_chain: chunk.headingChain }),
        hub_id: memory.hubId,
        hub_name: memory.hub.name,
        // A topic being deleted is not_found to every read: its memories show none.
        ...(memory.topicId && !memory.topic?.deletingAt && { topic_id: memory.topicId }),
        ...(memory.topic && !memory.topic.deletingAt && { topic_name: memory.topic.name }),
      },
    ];
  });
}

/** The first SNIPPET_SOURCE_CHARS characters of each memory's text, by id. */
async function memoryOpenings(ctx: AuthContext, hubIds: string[], ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await ctx.sql.query<{ id: string; opening: string }>(
    `SELECT id, left(content, $3) AS opening FROM memories WHERE id = ANY($1::uuid[]) AND hub_id = ANY($2::uuid[])`,
    [ids, hubIds, SNIPPET_SOURCE_CHARS],
  );
  return new Map(rows.map((row) => [row.id, row.opening]));
}

/** Active memories whose title contains the text (case-insensitive), newest first, not already found. */
async function titleMatches(ctx: AuthContext, hubIds: string[], query: SearchMemoriesQuery, exclude: string[], take: number): Promise<string[]> {
  const pattern = `%${query.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const rows = await ctx.sql.query<{ id: string }>(
    `SELECT id FROM memories
      WHERE hub_id = ANY($1::uuid[]) AND state = 'active' AND ($2::uuid IS NULL OR topic_id = $2::uuid)
        AND title ILIKE $3 ESCAPE '\\' AND NOT (id = ANY($4::uuid[]))
      ORDER BY updated_at DESC, id DESC
      LIMIT $5`,
    [hubIds, query.topic_id ?? null, pattern, exclude, take],
  );
  return rows.map((row) => row.id);
}

function searchWords(q: string): string[] {
  return q
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((word) => word.length > 1);
}

/**
 * About SNIPPET_CHARS of `text` around the earliest match of any of `terms` (stems or typed
 * words, matched as word prefixes), cut at word boundaries; the start of the text when none is found.
 */
function snippet(text: string, terms: string[]): string {
  // Markdown heading marks are layout, not words.
  const flat = text.replace(/^#{1,6}\s+/gm, "").replace(/\s+/g, " ").trim();
  const lower = flat.toLowerCase();
  let at = -1;
  for (const term of terms) {
    const needle = term.toLowerCase();
    if (needle.length < 2) continue;
    let from = 0;
    while (from < lower.length) {
      const i = lower.indexOf(needle, from);
      if (i < 0) break;
      // A word prefix only: "log" should not light up inside "catalog".
      if (i === 0 || !/[\p{L}\p{N}]/u.test(lower[i - 1]!)) {
        if (at < 0 || i < at) at = i;
        break;
      }
      from = i + 1;
    }
  }
  if (flat.length <= SNIPPET_CHARS) return flat;
  let start = at < 0 ? 0 : Math.max(0, at - SNIPPET_LEAD);
  if (start > 0) {
    const space = flat.indexOf(" ", start);
    start = space >= 0 && space < at ? space + 1 : start;
  }
  let end = Math.min(flat.length, start + SNIPPET_CHARS);
  if (end < flat.length) {
    const space = flat.lastIndexOf(" ", end);
    if (space > start + SNIPPET_CHARS / 2) end = space;
  }
  return `${start > 0 ? "…" : ""}${flat.slice(start, end)}${end < flat.length ? "…" : ""}`;
}
