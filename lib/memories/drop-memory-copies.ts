import type { DbClient } from "@/lib/db/database.ts";

/** A contradiction review closed because one of its memories was hard-deleted. */
export const MEMORY_DELETED_RESOLUTION = "memory_deleted";

/** What a review notification shows for a hard-deleted memory's title. */
const DELETED_TITLE_JSON = JSON.stringify("(deleted)");

/**
 * What other rows keep of hard-deleted memories goes in the delete's own transaction, so a delete
 * that is "not recoverable" is not recoverable from what any member can still read:
 * - a dream merge's `details.original_content` (the kept memory's content before the model's
 *   rewrite) and a contradiction review's excerpt of the deleted side;
 * - an open review naming the memory closes (`resolved`, `memory_deleted`) with its bell rows
 *   (expired): neither side can be kept or archived once one is gone; every bell row of a review
 *   naming it, open or decided, loses its title (`memory_a`/`memory_b` keep the id);
 * - a custom board's card that cites it is emptied (the answer quotes what it cites) and cooks
 *   again, and the versions of its history that cite it go with their verdicts.
 * Each a single statement over the (GIN-indexed) id arrays, however many rows name the memories;
 * ids of memories moved between hubs are found wherever they were named. Returns the boards that
 * now need a new card (the caller kicks them after its commit).
 */
export async function dropMemoryCopies(tx: DbClient, memoryIds: string[], now: Date): Promise<string[]> {
  if (memoryIds.length === 0) return [];
  const closed = await tx.$queryRaw<{ id: string }[]>`
    WITH named AS (
      SELECT id, state FROM dream_actions
       WHERE source_memory_ids && ${memoryIds}::uuid[] AND action_type IN ('merge', 'contradiction')
       FOR UPDATE
    ), changed AS (
      UPDATE dream_actions d SET
        details = CASE
          WHEN d.action_type = 'merge' THEN d.details - 'original_content'
          ELSE (CASE WHEN d.source_memory_ids[1] = ANY(${memoryIds}::uuid[]) THEN d.details #- '{a,excerpt}' ELSE d.details END)
               #- CASE WHEN d.source_memory_ids[2] = ANY(${memoryIds}::uuid[]) THEN '{b,excerpt}'::text[] ELSE '{}'::text[] END
        END,
        state = CASE WHEN named.state = 'pending_review' THEN 'resolved' ELSE d.state END,
        resolution = CASE WHEN named.state = 'pending_review' THEN ${MEMORY_DELETED_RESOLUTION} ELSE d.resolution END,
        resolved_at = CASE WHEN named.state = 'pending_review' THEN ${now} ELSE d.resolved_at END
        FROM named WHERE d.id = named.id
      RETURNING d.id::text AS id, named.state AS was, d.action_type,
                d.source_memory_ids[1] = ANY(${memoryIds}::uuid[]) AS a_gone, d.source_memory_ids[2] = ANY(${memoryIds}::uuid[]) AS b_gone
    ), scrubbed AS (
      -- The review's bell rows (open or decided) name both sides by title; the deleted side's goes,
      -- kept a string so the payload keeps its shape (ReviewContradictionPayload).
      UPDATE notifications n SET payload =
        CASE WHEN c.b_gone THEN jsonb_set(CASE WHEN c.a_gone THEN jsonb_set(n.payload, '{memory_a,title}', ${DELETED_TITLE_JSON}::jsonb, false) ELSE n.payload END,
                                          '{memory_b,title}', ${DELETED_TITLE_JSON}::jsonb, false)
             ELSE CASE WHEN c.a_gone THEN jsonb_set(n.payload, '{memory_a,title}', ${DELETED_TITLE_JSON}::jsonb, false) ELSE n.payload END END
        FROM changed c
       WHERE n.kind = 'review_contradiction' AND n.source_id = c.id AND c.action_type = 'contradiction' AND (c.a_gone OR c.b_gone)
    )
    SELECT id FROM changed WHERE was = 'pending_review'`;
  if (closed.length) {
    await tx.notification.updateMany({
      where: { kind: "review_contradiction", sourceId: { in: closed.map((row) => row.id) }, status: "pending" },
      data: { status: "expired", resolvedAt: now },
    });
  }
  await tx.$executeRaw`
    WITH gone AS (DELETE FROM custom_board_card_versions WHERE cite_memory_ids && ${memoryIds}::uuid[] RETURNING board_id, content_produced_at)
    DELETE FROM custom_board_feedback f USING gone WHERE f.board_id = gone.board_id AND f.content_produced_at = gone.content_produced_at`;
  const emptied = await tx.$queryRaw<{ id: string; status: string }[]>`
    WITH old AS (
      SELECT id, card_content_updated_at FROM custom_boards WHERE card_cite_memory_ids && ${memoryIds}::uuid[] FOR UPDATE
    ), verdicts AS (
      DELETE FROM custom_board_feedback f USING old WHERE f.board_id = old.id AND f.content_produced_at = old.card_content_updated_at
    )
    UPDATE custom_boards b SET
      card_payload = NULL, card_cite_memory_ids = '{}', card_state = NULL, card_resolution = NULL, card_dream_run_id = NULL,
      card_content_updated_at = NULL, card_created_at = NULL, card_asked_at = NULL,
      status = CASE WHEN b.status = 'paused' THEN 'paused' ELSE 'cooking' END, updated_at = ${now}
      FROM old WHERE b.id = old.id
    RETURNING b.id::text AS id, b.status`;
  return emptied.filter((board) => board.status !== "paused").map((board) => board.id);
}
