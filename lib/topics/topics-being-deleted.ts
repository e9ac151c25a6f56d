import type { SqlRunner } from "@/lib/db/database.ts";

/**
 * Of these topics, those being deleted. A memory still filed under one (its delete takes them out a
 * batch at a time) is shown with no topic: the topic is not_found to every request, and its id on the
 * memory was a reference a client could not follow. One statement by primary key, for a page's topics.
 */
export async function topicsBeingDeleted(sql: SqlRunner, topicIds: Iterable<string | null | undefined>): Promise<Set<string>> {
  const ids = [...new Set([...topicIds].filter((id): id is string => Boolean(id)))];
  if (ids.length === 0) return new Set();
  const rows = await sql.query<{ id: string }>(`SELECT id::text AS id FROM topics WHERE id = ANY($1::uuid[]) AND deleting_at IS NOT NULL`, [ids]);
  return new Set(rows.map((row) => row.id));
}
