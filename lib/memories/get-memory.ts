import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { Attachment } from "@/lib/db/generated/client.ts";
import { memoryAccessSql } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { recentOpens } from "./recent-opens.ts";
import type { SqlRunner } from "@/lib/db/database.ts";
import { readMemoryWithContent } from "./memory-object-rows.ts";
import { serializeMemoryWithContent, type AttachmentObjectRow, type MemoryObjectRow } from "./serialize-memory.ts";

/**
 * One memory with content and attachments; reading it counts as an access. `countAccess: false`
 * (a HEAD, which runs this GET but shows nothing) only looks.
 */
export async function getMemory(ctx: AuthContext, id: string, options: { countAccess?: boolean } = {}) {
  const memory = await findMemory(ctx, id, options.countAccess ?? true, false);
  return withAttachments(ctx, memory);
}

/** Where a page of a memory's text starts and ends, in Unicode characters (code points). */
export interface MemoryPage {
  offset: number;
  /** The whole text's length. */
  length: number;
  /** The offset of the next page, or null on the last. */
  next: number | null;
}

/**
 * getMemory with `chars` characters of its text from `offset` (code points, as PostgreSQL's substring
 * counts them, so a page never splits a character): a paged read (MCP's engram_get and fetch) loaded
 * the whole text, up to 3 MiB, from the database for every page of it.
 */
export async function getMemoryPage(ctx: AuthContext, id: string, page: { offset: number; chars: number }, options: { countAccess?: boolean } = {}) {
  let memory = await findMemory(ctx, id, options.countAccess ?? true, true);
  // PostgreSQL's substring takes an int; no text is that long (a value is at most 1 GB).
  const from = Math.min(page.offset, 2 ** 31 - 2);
  for (let attempt = 1; ; attempt++) {
    // Only the text of the version the row read names: an edit committing between the two reads
    // answered version N's title, version and hash with version N+1's text (and measured that text).
    // The attachments in the same statement, so of the same version: read after it, a file replacing
    // the memory's original in between answered version N's text with version N+1's attachment.
    const [text] = await ctx.db.$queryRaw<{ content: string; length: number; attachments: AttachmentRow[] }[]>`
      SELECT substring(m.content FROM ${from + 1}::int FOR ${page.chars}::int) AS content, char_length(m.content)::int AS length,
             COALESCE((SELECT json_agg(json_build_object(
                 'id', a.id, 'memoryId', a.memory_id, 'hubId', a.hub_id, 'objectKey', a.object_key, 'filename', a.filename,
                 'contentType', a.content_type, 'sizeBytes', a.size_bytes, 'sha256', a.sha256, 'width', a.width, 'height', a.height,
                 'createdAt', (extract(epoch FROM a.created_at) * 1000)::float8
               ) ORDER BY a.created_at, a.id) FROM attachments a WHERE a.memory_id = m.id), '[]'::json) AS attachments
      FROM memories m WHERE m.id = ${memory.id}::uuid AND m.version = ${memory.version} AND m.content_hash = ${memory.contentHash}`;
    if (text) {
      const offset = Math.min(from, text.length);
      const end = offset + [...text.content].length;
      const attachments = text.attachments.map((a) => ({ ...a, createdAt: new Date(a.createdAt) }));
      return {
        memory: serializeMemoryWithContent({ ...memory, content: text.content, attachments }),
        page: { offset, length: text.length, next: end < text.length ? end : null } satisfies MemoryPage,
      };
    }
    if (attempt >= PAGE_READ_ATTEMPTS) throw new ApiError("conflict", "The memory changed while it was being read: read it again");
    // Edited (read the new version; this read's access is counted already) or deleted (as gone as if it had gone before the first read).
    memory = await findMemory(ctx, id, false, true);
  }
}

/**
 * At least as many characters as a page of the memory's text from `offset` holds, read before the page
 * is (MCP's result budget counts a read at it): bytes, which are never fewer than characters, as
 * PostgreSQL's octet_length takes them from the stored value's header without loading the text. A
 * memory the caller cannot read bounds nothing, as one not there: looked up by id alone, how long a
 * batch's reads waited told the size of a memory in another tenant's hub.
 */
export async function pageCharsAtMost(ctx: AuthContext, id: string, page: { offset: number; chars: number }): Promise<number> {
  if (!isUuid(id)) return 0;
  const access = memoryAccessSql(ctx);
  const params = [...access.params, id, page.offset, page.chars];
  const n = access.params.length;
  const [row] = await ctx.sql.query<{ n: number }>(
    `SELECT LEAST(GREATEST(octet_length(m.content)::bigint - $${n + 2}::bigint, 0), $${n + 3}::bigint)::int AS n
       FROM memories m WHERE m.id = $${n + 1}::uuid AND ${access.where}`,
    params,
  );
  return row ? Number(row.n) : 0;
}

/** An attachment as the page's statement returns it (JSON): its time in epoch milliseconds. */
type AttachmentRow = Omit<Attachment, "createdAt"> & { createdAt: number };

/** Reads of a memory's row and page before a paged read gives up on a memory edited under it each time. */
const PAGE_READ_ATTEMPTS = 3;

async function findMemory(ctx: AuthContext, id: string, counted: boolean, omitContent: false): Promise<MemoryObjectRow & { content: string }>;
async function findMemory(ctx: AuthContext, id: string, counted: boolean, omitContent: true): Promise<MemoryObjectRow>;
async function findMemory(ctx: AuthContext, id: string, counted: boolean, omitContent: boolean): Promise<MemoryObjectRow> {
  // Only what the answer shows (MemoryObjectRow), with the text unless a page of it is read after.
  const memory = isUuid(id) ? await readMemoryWithContent(ctx.sql, id, memoryAccessSql(ctx), { counted, now: ctx.now(), content: !omitContent }) : undefined;
  if (!memory) throw new ApiError("not_found", "Memory not found");
  // A view signalled right after this read (POST …/access) is the same open.
  if (counted) recentOpens.remember(ctx.user.id, memory.id, ctx.now());
  return memory;
}

async function withAttachments(ctx: AuthContext, memory: MemoryObjectRow & { content: string }) {
  // Its topic being deleted, the memory read shows none already (memory-object-rows.ts).
  return serializeMemoryWithContent({ ...memory, attachments: await attachmentsOf(ctx.sql, memory.id) });
}

/**
 * A memory's attachments, oldest first, as Prisma gives them. Every GET reads them, most often to find
 * none: as a plain statement it costs the server about a third of Prisma's CPU for the same read (issue 16).
 */
async function attachmentsOf(sql: SqlRunner, memoryId: string): Promise<AttachmentObjectRow[]> {
  const rows = await sql.query<AttachmentSqlRow>(
    `SELECT id::text AS id, memory_id::text AS memory_id, filename, content_type, size_bytes, sha256, width, height, created_at
       FROM attachments WHERE memory_id = $1::uuid ORDER BY created_at ASC`,
    [memoryId],
  );
  return rows.map((row) => ({
    id: row.id,
    memoryId: row.memory_id,
    filename: row.filename,
    contentType: row.content_type,
    sizeBytes: Number(row.size_bytes),
    sha256: row.sha256,
    width: row.width === null ? null : Number(row.width),
    height: row.height === null ? null : Number(row.height),
    createdAt: new Date(row.created_at),
  }));
}

/** An attachment as attachmentsOf's statement returns it. */
interface AttachmentSqlRow {
  id: string;
  memory_id: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  sha256: string | null;
  width: number | null;
  height: number | null;
  /** node-postgres gives a Date, PGlite a Date or text. */
  created_at: Date | string;
}
