import type { DbClient } from "@/lib/db/database.ts";

// A dream writes hundreds to thousands of rows per run. One parameterised
// statement per batch (instead of one ORM round trip per row) keeps a 10k-memory
// run inside its time budget; each returns the ids it actually changed, so a
// memory edited or archived since the scan is left alone and gets no action.

/**
 * Archives each `older` as superseded by its `newer`, if still active. Returns the updated_at each
 * archived memory got (`now`, or past it: memories_updated_at_forward), which an undo checks.
 */
export async function archiveSuperseded(tx: DbClient, pairs: { older: string; newer: string }[], now: Date): Promise<Map<string, Date>> {
  if (pairs.length === 0) return new Map();
  const rows = await tx.$queryRawUnsafe<{ id: string; updatedAt: Date }[]>(
    `UPDATE memories m SET state = 'archived', superseded_by = u.newer, updated_at = $3
       FROM unnest($1::uuid[], $2::uuid[]) AS u(older, newer)
      WHERE m.id = u.older AND m.state = 'active'
      RETURNING m.id::text AS id, m.updated_at AS "updatedAt"`,
    pairs.map((p) => p.older),
    pairs.map((p) => p.newer),
    now,
  );
  return new Map(rows.map((r) => [r.id, r.updatedAt]));
}

/**
 * Puts each memory into its topic, if still active, unsorted and with the title and content the run
 * placed it by (`contentChangedAt`: a member's edit since is filed by the run after it is processed,
 * as any memory with an edit pending). A new topic_id moves updated_at, as
 * filing through the API and undoing the organize do: clients sync by it (the list's order and cursor).
 * Returns the updated_at each moved memory got: `now`, or past it when the stored one was not behind
 * `now` (trigger memories_updated_at_forward), which its action is stamped with (see dueHubs).
 */
export async function assignTopics(
  tx: DbClient,
  moves: { memoryId: string; topicId: string; contentChangedAt: Date }[],
  now: Date,
  excludedKinds: readonly string[] = [],
): Promise<Map<string, Date>> {
  if (moves.length === 0) return new Map();
  // Nor one whose kind the hub's owner excluded from dreams: a member's change of kind since the run
  // read the hub leaves its text (and content_changed_at) as it was.
  const rows = await tx.$queryRawUnsafe<{ id: string; updatedAt: Date }[]>(
    `UPDATE memories m SET topic_id = u.topic_id, updated_at = $3
       FROM unnest($1::uuid[], $2::uuid[], $4::timestamptz[]) AS u(id, topic_id, changed)
      WHERE m.id = u.id AND m.state = 'active' AND m.topic_id IS NULL AND m.content_changed_at = u.changed
        AND m.kind <> ALL($5::text[])
        AND EXISTS (SELECT 1 FROM topics t WHERE t.id = u.topic_id AND t.archived_at IS NULL AND t.deleting_at IS NULL)
      RETURNING m.id::text AS id, m.updated_at AS "updatedAt"`,
    moves.map((m) => m.memoryId),
    moves.map((m) => m.topicId),
    now,
    moves.map((m) => m.contentChangedAt),
    [...excludedKinds],
  );
  return new Map(rows.map((r) => [r.id, r.updatedAt]));
}

/** Records organize actions (one memory each) in one statement, each stamped with the updated_at its filing wrote. */
export async function insertOrganizeActions(
  tx: DbClient,
  runId: string,
  hubId: string,
  actions: { id: string; memoryId: string; topicId: string; topicName: string; createdTopic: boolean; reason: string; writtenAt: Date }[],
): Promise<void> {
  if (actions.length === 0) return;
  await tx.$executeRawUnsafe(
    `INSERT INTO dream_actions (id, run_id, hub_id, action_type, state, source_memory_ids, result_memory_id, to_topic_id, created_topic, reason, details, created_at)
     SELECT u.id, $1::uuid, $2::uuid, 'organize', 'applied', ARRAY[u.memory_id], u.memory_id, u.topic_id, u.created_topic, u.reason, jsonb_build_object('topic_name', u.topic_name), u.written_at
       FROM unnest($3::timestamptz[], $4::uuid[], $5::uuid[], $6::uuid[], $7::boolean[], $8::text[], $9::text[]) AS u(written_at, id, memory_id, topic_id, created_topic, reason, topic_name)`,
    runId,
    hubId,
    actions.map((a) => a.writtenAt),
    actions.map((a) => a.id),
    actions.map((a) => a.memoryId),
    actions.map((a) => a.topicId),
    actions.map((a) => a.createdTopic),
    actions.map((a) => a.reason),
    actions.map((a) => a.topicName),
  );
}
