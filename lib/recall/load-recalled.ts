import type { SqlRunner } from "@/lib/db/database.ts";
import { formatAge } from "./format-age.ts";

/** A memory a search picked, with the chunk that matched (null: the memory matched as a whole). */
export interface RecallPick {
  memoryId: string;
  chunkId: string | null;
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
  sql: SqlRunner,
  picks: (RecallPick & { score: number })[],
  options: {
    now: Date;
    withHub: boolean;
    timeZone?: string;
    /** The caller and the hubs searched: the statement returns only active memories of the caller's hubs among them. */
    userId: string;
    hubIds: string[];
  },
): Promise<RecalledMemory[]> {
  if (picks.length === 0) return [];
  const rows = await sql.query<
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
    }
  >(
    `SELECT id, title, summary, kind, stability, source, created_at, hub_id, hub_name, topic_id, topic_name, chunk_content, heading_chain
     FROM engram_recall_entries($1::uuid[], $2::uuid[], $3::int, $4::uuid, $5::uuid[])`,
    [picks.map((p) => p.memoryId), picks.map((p) => p.chunkId), EXCERPT_CHARS, options.userId, options.hubIds],
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
      age: formatAge(createdAt, options.now, options.timeZone),
      created_at: createdAt.toISOString(),
    };
    if (options.withHub) {
      entry.hub_id = row.hub_id;
      entry.hub_name = row.hub_name;
    }
    // Null for a topic being deleted too (not_found to every read): the statement shows its memories with none.
    if (row.topic_id) {
      entry.topic_id = row.topic_id;
      entry.topic_name = row.topic_name ?? "";
    }
    return [entry];
  });
}
