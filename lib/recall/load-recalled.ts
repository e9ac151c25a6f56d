import type { DbClient } from "@/lib/db/database.ts";
import { formatAge } from "./format-age.ts";

/** A memory a search picked, with the chunk that matched (null: the memory matched as a whole). */
export interface RecallPick {
  memoryId: string;
  chunkId: string | null;
}

export interface CandidateFacts {
  memoryId: string;
  hubId: string;
  kind: string;
  createdAt: Date;
  projectContext: { repo?: string; project?: string; branch?: string } | null;
  /** How many of the query's entities the memory (title + content) never mentions. */
  missingEntities: number;
}

/**
 * Per-memory facts that ranking needs beyond the chunk scores. An entity counts
 * as mentioned when at least half of its analysed words occur in the memory.
 */
export async function loadCandidateFacts(
  db: DbClient,
  memoryIds: string[],
  entities: { lexemes: string[] }[],
): Promise<Map<string, CandidateFacts>> {
  if (memoryIds.length === 0) return new Map();
  const index = entities.flatMap((entity, i) => entity.lexemes.map(() => i));
  const lexemes = entities.flatMap((entity) => entity.lexemes);
  const rows = await db.$queryRawUnsafe<
    { id: string; hub_id: string; kind: string; created_at: Date; project_context: unknown; missing: bigint | number }[]
  >(
    `WITH e AS MATERIALIZED (
       SELECT x.idx, engram_terms_tsquery(ARRAY[x.lexeme], ' | ') AS tsq FROM unnest($2::int[], $3::text[]) AS x(idx, lexeme)
     )
     SELECT m.id, m.hub_id, m.kind, m.created_at, m.project_context,
            (SELECT count(*) FROM (
               SELECT e.idx FROM e GROUP BY e.idx
               HAVING avg(CASE WHEN coalesce(m.search_vector, ''::tsvector) @@ e.tsq THEN 1 ELSE 0 END) < 0.5
             ) AS absent) AS missing
     FROM memories m WHERE m.id = ANY($1::uuid[])`,
    memoryIds,
    index,
    lexemes,
  );
  return new Map(
    rows.map((row) => [
      row.id,
      {
        memoryId: row.id,
        hubId: row.hub_id,
        kind: row.kind,
        createdAt: new Date(row.created_at),
        projectContext: row.project_context && typeof row.project_context === "object" ? (row.project_context as CandidateFacts["projectContext"]) : null,
        missingEntities: Number(row.missing),
      },
    ]),
  );
}

/** How long a whole-memory match's excerpt is (it has no chunk yet). */
const EXCERPT_CHARS = 1500;

export interface RecalledMemory {
  id: string;
  title: string;
  summary: string;
  chunk_content: string;
  heading_chain: string;
  relevance_score: number;
  kind: string;
  stability: string;
  source: string;
  age: string;
  created_at: string;
  hub_id?: string;
  hub_name?: string;
  topic_id?: string;
  topic_name?: string;
}

/** The recall entry shape (spec "Recalled memory") for picked memories, in the given order. */
export async function loadRecalled(
  db: DbClient,
  picks: (RecallPick & { score: number })[],
  options: { now: Date; withHub: boolean },
): Promise<RecalledMemory[]> {
  if (picks.length === 0) return [];
  const rows = await db.$queryRawUnsafe<
    {
      id: string;
      title: string;
      summary: string;
      kind: string;
      stability: string;
      source: string;
      created_at: Date;
      hub_id: string;
      hub_name: string;
      topic_id: string | null;
      topic_name: string | null;
      chunk_content: string;
      heading_chain: string;
    }[]
  >(
    `SELECT m.id, m.title, m.summary, m.kind, m.stability, m.source, m.created_at, m.hub_id, h.name AS hub_name,
            m.topic_id, t.name AS topic_name,
            CASE WHEN c.id IS NULL THEN left(m.content, ${EXCERPT_CHARS}) ELSE c.content END AS chunk_content,
            coalesce(c.heading_chain, '') AS heading_chain
     FROM unnest($1::uuid[], $2::uuid[]) AS p(memory_id, chunk_id)
     JOIN memories m ON m.id = p.memory_id
     JOIN hubs h ON h.id = m.hub_id
     LEFT JOIN topics t ON t.id = m.topic_id
     LEFT JOIN chunks c ON c.id = p.chunk_id AND c.memory_id = m.id`,
    picks.map((p) => p.memoryId),
    picks.map((p) => p.chunkId),
  );
  const byId = new Map(rows.map((row) => [row.id, row]));
  return picks.flatMap((pick) => {
    const row = byId.get(pick.memoryId);
    if (!row) return [];
    const createdAt = new Date(row.created_at);
    const entry: RecalledMemory = {
      id: row.id,
      title: row.title,
      summary: row.summary,
      chunk_content: row.chunk_content,
      heading_chain: row.heading_chain,
      relevance_score: Math.round(pick.score * 1000) / 1000,
      kind: row.kind,
      stability: row.stability,
      source: row.source,
      age: formatAge(createdAt, options.now),
      created_at: createdAt.toISOString(),
    };
    if (options.withHub) {
      entry.hub_id = row.hub_id;
      entry.hub_name = row.hub_name;
    }
    if (row.topic_id) {
      entry.topic_id = row.topic_id;
      entry.topic_name = row.topic_name ?? "";
    }
    return [entry];
  });
}
