import type { SqlRunner } from "@/lib/db/database.ts";

/**
 * Of these topics of these hubs (the caller's, so a topic elsewhere tells nothing), those being
 * deleted. A memory still filed under one (its delete takes them out a batch at a time) is shown with
 * no topic: the topic is not_found to every request, and its id on the memory was a reference a client
 * could not follow. One statement by primary key, none when no topic is named.
 */
export async function topicsBeingDeleted(sql: SqlRunner, hubIds: readonly string[], topicIds: Iterable<string | null | undefined>): Promise<Set<string>> {
  const ids = [...new Set([...topicIds].filter((id): id is string => Boolean(id)))];
  if (ids.length === 0 || hubIds.length === 0) return new Set();
  const rows = await sql.query<{ id: string }>(
    `SELECT id::text AS id FROM topics WHERE id = ANY($1::uuid[]) AND hub_id = ANY($2::uuid[]) AND deleting_at IS NOT NULL`,
    [ids, [...new Set(hubIds)]],
  );
  return new Set(rows.map((row) => row.id));
}

/**
 * Memories read through Prisma's client (an edit's answer, a push answered with the memory it found,
 * related memories) with the topic they show: none for a topic being deleted, as the plain reads of the
 * list and a GET give it in their statement (lib/memories/memory-object-rows.ts). A statement only when
 * some memory has a topic.
 */
export async function withShownTopics<T extends { hubId: string; topicId: string | null }>(sql: SqlRunner, memories: T[]): Promise<T[]> {
  const hidden = await topicsBeingDeleted(
    sql,
    memories.map((memory) => memory.hubId),
    memories.map((memory) => memory.topicId),
  );
  return hidden.size === 0 ? memories : memories.map((memory) => (memory.topicId && hidden.has(memory.topicId) ? { ...memory, topicId: null } : memory));
}

/**
 * Whether a topic filter names a topic being deleted in a hub the caller belongs to (among `hubIds`
 * when given): recall runs it beside its lexical leg, whose statement resolves the caller's hubs.
 * A topic of another hub is never reported, so its state cannot be told from the answer or its time.
 */
export async function topicBeingDeletedFor(sql: SqlRunner, userId: string, hubIds: readonly string[] | undefined, topicId: string): Promise<boolean> {
  const rows = await sql.query<{ id: string }>(
    `SELECT t.id::text AS id FROM topics t
      JOIN hub_members hm ON hm.hub_id = t.hub_id AND hm.user_id = $2::uuid
     WHERE t.id = $1::uuid AND t.deleting_at IS NOT NULL AND ($3::uuid[] IS NULL OR t.hub_id = ANY($3::uuid[]))`,
    [topicId, userId, hubIds ? [...hubIds] : null],
  );
  return rows.length > 0;
}
