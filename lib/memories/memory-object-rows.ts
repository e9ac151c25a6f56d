import type { SqlRunner } from "@/lib/db/database.ts";
import type { MemoryObjectRow } from "./serialize-memory.ts";

/**
 * The columns of MemoryObjectRow as a plain statement reads them (alias `m`). The memory list's
 * page runs on every list request: through Prisma's client, mapping its 20 rows cost the server about
 * 0.5 ms more CPU than this statement (issue 16). A topic being deleted is not_found to every request,
 * so a memory its delete has not yet unfiled shows no topic: read here, by the topic's primary key in
 * the same statement, rather than by a lookup of the page's topics after it (a round trip per page).
 */
const MEMORY_OBJECT_COLUMNS = `m.id::text AS id, m.hub_id::text AS hub_id, m.owner_id::text AS owner_id, m.title, m.content_type,
  m.content_hash, m.summary, m.tags::text[] AS tags, m.hint, m.kind, m.stability, m.boundary, m.state, m.source, m.source_agent,
  m.assisted_by_agent, m.initiation_type, m.source_path, m.hub_reason, m.project_context::text AS project_context,
  (SELECT t.id::text FROM topics t WHERE t.id = m.topic_id AND t.deleting_at IS NULL) AS topic_id, m.version, m.access_count, m.last_accessed_at, m.processing_status, m.processing_error,
  m.processed_at, m.created_at, m.updated_at`;

/** Memory rows with what their API objects show, mapped as Prisma maps them. */
export async function memoryObjectRows(sql: SqlRunner, from: string, params: unknown[]): Promise<MemoryObjectRow[]> {
  return (await sql.query<Row>(`SELECT ${MEMORY_OBJECT_COLUMNS} FROM memories m ${from}`, params)).map(memoryObjectRow);
}

/**
 * A memory's GET: its row with the content, counting the access in the same statement when `counted`
 * (Prisma's updateManyAndReturn cost a GET about 0.3 ms more of the server's CPU). `access` is the
 * caller's membership condition on `m` (memoryAccessSql).
 */
export async function readMemoryWithContent(
  sql: SqlRunner,
  id: string,
  access: { where: string; params: unknown[] },
  options: { counted: boolean; now: Date; content: boolean },
): Promise<(MemoryObjectRow & { content?: string }) | undefined> {
  const params = [...access.params, id];
  const idParam = `$${params.length}::uuid`;
  const columns = `${MEMORY_OBJECT_COLUMNS}${options.content ? ", m.content" : ""}`;
  let text = `SELECT ${columns} FROM memories m WHERE m.id = ${idParam} AND ${access.where}`;
  if (options.counted) {
    params.push(options.now.toISOString());
    text = `UPDATE memories m SET access_count = m.access_count + 1, last_accessed_at = $${params.length}::timestamptz
             WHERE m.id = ${idParam} AND ${access.where} RETURNING ${columns}`;
  }
  const [row] = await sql.query<Row & { content?: string }>(text, params);
  return row && { ...memoryObjectRow(row), ...(options.content && { content: row.content }) };
}

function memoryObjectRow(row: Row): MemoryObjectRow {
  return {
    id: row.id,
    hubId: row.hub_id,
    ownerId: row.owner_id,
    title: row.title,
    contentType: row.content_type,
    contentHash: row.content_hash,
    summary: row.summary,
    tags: row.tags,
    hint: row.hint,
    kind: row.kind,
    stability: row.stability,
    boundary: row.boundary,
    state: row.state,
    source: row.source,
    sourceAgent: row.source_agent,
    assistedByAgent: row.assisted_by_agent,
    initiationType: row.initiation_type,
    sourcePath: row.source_path,
    hubReason: row.hub_reason,
    // Read as text and parsed here: the value Prisma gives, whichever driver and whatever JSON it holds.
    projectContext: row.project_context === null ? null : (JSON.parse(row.project_context) as MemoryObjectRow["projectContext"]),
    topicId: row.topic_id,
    version: Number(row.version),
    accessCount: Number(row.access_count),
    lastAccessedAt: instant(row.last_accessed_at),
    processingStatus: row.processing_status,
    processingError: row.processing_error,
    processedAt: instant(row.processed_at),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

/** A timestamp as either driver returns it (node-postgres: Date; PGlite: Date or text). */
function instant(value: Date | string | null): Date | null {
  return value === null ? null : new Date(value);
}

interface Row {
  id: string;
  hub_id: string;
  owner_id: string;
  title: string;
  content_type: string;
  content_hash: string;
  summary: string;
  tags: string[];
  hint: string | null;
  kind: string;
  stability: string;
  boundary: string;
  state: string;
  source: string;
  source_agent: string | null;
  assisted_by_agent: string | null;
  initiation_type: string | null;
  source_path: string | null;
  hub_reason: string | null;
  project_context: string | null;
  topic_id: string | null;
  version: number;
  access_count: number;
  last_accessed_at: Date | string | null;
  processing_status: string;
  processing_error: string | null;
  processed_at: Date | string | null;
  created_at: Date | string;
  updated_at: Date | string;
}
