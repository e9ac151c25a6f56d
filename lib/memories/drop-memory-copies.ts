import type { DbClient } from "@/lib/db/database.ts";
import { Prisma } from "@/lib/db/generated/client.ts";

/** A contradiction review closed because one of its memories was hard-deleted. */
export const MEMORY_DELETED_RESOLUTION = "memory_deleted";
/** A contradiction review closed because one of its memories moved to another hub. */
export const MEMORY_MOVED_RESOLUTION = "memory_moved";

/** What a review and its notifications show for a hard-deleted memory's title. */
const DELETED_TITLE_JSON = JSON.stringify("(deleted)");
/** What the hub a memory left shows for its title. */
const MOVED_TITLE_JSON = JSON.stringify("(moved)");

/**
 * What a dream action naming a hard-deleted memory gives as its reason: the one written by the run
 * quotes both memories' titles (and a contradiction the values read from their text).
 */
export const DELETED_REASON = {
  merge: "merged as near-duplicates; one of the two memories has since been deleted",
  contradiction: "two memories disagreed; one of them has since been deleted",
  archive: "archived as stale; the memory has since been deleted",
} as const;

/** The same, in the hub a memory moved out of (the reason there quoted its title). */
export const MOVED_REASON = {
  merge: "merged as near-duplicates; one of the two memories has since moved to another hub",
  contradiction: "two memories disagreed; one of them has since moved to another hub",
  archive: "archived as stale; the memory has since moved to another hub",
} as const;

/** A side's key in a review's details, or no path (a no-op for #- and jsonb_set) when that side stays. */
function side(key: "a" | "b", field: "excerpt" | "title") {
  return Prisma.sql`CASE WHEN named.${Prisma.raw(`${key}_gone`)} THEN ${`{${key},${field}}`}::text[] ELSE '{}'::text[] END`;
}

/**
 * A run's report lists its first actions by their reasons: each line of an action rewritten above
 * gets the new reason. Lines start "- " then the reason (dream-report-text.ts). A running run has no
 * report yet (finishDreamRun reads its actions under share locks, after this commits) and is not
 * locked: its batches hold its row while they lock memories, which this delete holds already.
 */
async function rewriteReports(tx: DbClient, changed: { runId: string; oldReason: string; newReason: string }[]) {
  const byRun = new Map<string, { oldReason: string; newReason: string }[]>();
  for (const row of changed) if (row.oldReason !== row.newReason) byRun.set(row.runId, [...(byRun.get(row.runId) ?? []), row]);
  if (byRun.size === 0) return;
  const runs = await tx.$queryRaw<{ id: string; report: string }[]>`
    SELECT id::text AS id, report FROM dream_runs WHERE id = ANY(${[...byRun.keys()]}::uuid[]) AND status <> 'running' ORDER BY id FOR UPDATE`;
  for (const run of runs) {
    let report = run.report;
    for (const row of byRun.get(run.id)!) report = report.split(`\n- ${row.oldReason}`).join(`\n- ${row.newReason}`);
    if (report !== run.report) await tx.$executeRaw`UPDATE dream_runs SET report = ${report} WHERE id = ${run.id}::uuid`;
  }
}

/**
 * What other rows keep of hard-deleted memories goes in the delete's own transaction, so a delete
 * that is "not recoverable" is not recoverable from what any member can still read:
 * - a dream merge's `details.original_content` (the kept memory's content before the model's
 *   rewrite) and a contradiction review's excerpt of the deleted side;
 * - an open review naming the memory closes (`resolved`, `memory_deleted`) with its bell rows
 *   (expired): neither side can be kept or archived once one is gone; every bell row of a review
 *   naming it, open or decided, loses its title (`memory_a`/`memory_b` keep the id);
 * - a merge, review or stale archive naming it gives a reason that quotes no title (DELETED_REASON),
 *   in the action, its review's bell rows and its run's report; a review's `details` show "(deleted)"
 *   as that side's title and lose the values read from the two texts;
 * - a failed processing's bell row shows "(deleted)" as the memory's title;
 * - a chat's stored turns (their tool results and citations, and the day's replay of their streams)
 *   show "(deleted)" as its title and lose the passages read from it (chat_scrub_memory_titles,
 *   migration 20261130190000); the answers' own text stays, as the owner's conversation;
 * - a custom board's card that cites it is emptied (the answer quotes what it cites) and cooks
 *   again, and the versions of its history that cite it go with their verdicts.
 * Each a single statement over the (GIN-indexed) id arrays, however many rows name the memories;
 * ids of memories moved between hubs are found wherever they were named. Returns the boards that
 * now need a new card (the caller kicks them after its commit).
 *
 * `moved`: the memories moved to that hub rather than being deleted. The members of the hubs they left
 * can no longer read them, so the same goes there ("(moved)" for the title, MOVED_REASON, reviews closed
 * `memory_moved`), but not in the hub they are in now, and their failed processing's bell row (their
 * owner's, who still reads them) stays. A chat, in no hub, shows "(moved)" unless its owner reads the
 * hub they went to.
 */
export async function dropMemoryCopies(tx: DbClient, memoryIds: string[], now: Date, moved?: { toHubId: string }): Promise<string[]> {
  if (memoryIds.length === 0) return [];
  const title = moved ? MOVED_TITLE_JSON : DELETED_TITLE_JSON;
  const reasons = moved ? MOVED_REASON : DELETED_REASON;
  const closedAs = moved ? MEMORY_MOVED_RESOLUTION : MEMORY_DELETED_RESOLUTION;
  const elsewhere = (column: string) => (moved ? Prisma.sql`AND ${Prisma.raw(column)} <> ${moved.toHubId}::uuid` : Prisma.empty);
  const changed = await tx.$queryRaw<{ id: string; was: string; runId: string; oldReason: string; newReason: string }[]>`
    WITH named AS (
      SELECT id, state, reason, source_memory_ids[1] = ANY(${memoryIds}::uuid[]) AS a_gone, source_memory_ids[2] = ANY(${memoryIds}::uuid[]) AS b_gone
        FROM dream_actions
       WHERE source_memory_ids && ${memoryIds}::uuid[] AND action_type IN ('merge', 'contradiction', 'archive') ${elsewhere("hub_id")}
       FOR UPDATE
    ), changed AS (
      UPDATE dream_actions d SET
        -- An empty path leaves the document as it is (#- and jsonb_set alike).
        details = CASE
          WHEN d.action_type = 'merge' THEN d.details - 'original_content'
          WHEN d.action_type = 'archive' THEN d.details
          -- values: one from each side's text, in the order the pair was compared (not a/b), so both go.
          ELSE jsonb_set(jsonb_set(d.details - 'values' #- ${side("a", "excerpt")} #- ${side("b", "excerpt")}, ${side("a", "title")}, ${title}::jsonb, false),
                         ${side("b", "title")}, ${title}::jsonb, false)
        END,
        reason = CASE d.action_type WHEN 'merge' THEN ${reasons.merge} WHEN 'contradiction' THEN ${reasons.contradiction} ELSE ${reasons.archive} END,
        state = CASE WHEN named.state = 'pending_review' THEN 'resolved' ELSE d.state END,
        resolution = CASE WHEN named.state = 'pending_review' THEN ${closedAs} ELSE d.resolution END,
        resolved_at = CASE WHEN named.state = 'pending_review' THEN ${now} ELSE d.resolved_at END
        FROM named WHERE d.id = named.id
      RETURNING d.id::text AS id, named.state AS was, d.action_type, d.run_id::text AS run_id, named.reason AS old_reason, d.reason AS new_reason, named.a_gone, named.b_gone
    ), scrubbed AS (
      -- The review's bell rows (open or decided) name both sides by title and quote the reason; the
      -- deleted side's title goes, kept a string so the payload keeps its shape (ReviewContradictionPayload).
      UPDATE notifications n SET payload = jsonb_set(
        CASE WHEN c.b_gone THEN jsonb_set(CASE WHEN c.a_gone THEN jsonb_set(n.payload, '{memory_a,title}', ${title}::jsonb, false) ELSE n.payload END,
                                          '{memory_b,title}', ${title}::jsonb, false)
             ELSE CASE WHEN c.a_gone THEN jsonb_set(n.payload, '{memory_a,title}', ${title}::jsonb, false) ELSE n.payload END END,
        '{reason}', to_jsonb(c.new_reason), false)
        FROM changed c
       WHERE n.kind = 'review_contradiction' AND n.source_id = c.id AND c.action_type = 'contradiction' AND (c.a_gone OR c.b_gone)
    )
    SELECT id, was, run_id AS "runId", old_reason AS "oldReason", new_reason AS "newReason" FROM changed`;
  const closed = changed.filter((row) => row.was === "pending_review");
  await rewriteReports(tx, changed);
  // A failed processing's bell row names the memory it failed on (its owner's, who may not be the deleter).
  if (!moved) {
    await tx.$executeRaw`
      UPDATE notifications SET payload = jsonb_set(payload, '{memory,title}', ${DELETED_TITLE_JSON}::jsonb, false)
       WHERE kind = 'memory_processing_failed' AND source_id = ANY(${memoryIds}::text[])`;
  }
  // A chat is its owner's, in no hub: a moved memory goes from the chats of owners who cannot read the
  // hub it went to. Found through the expression indexes on the ids they name (the same expressions, or
  // no index is used).
  const chatTitle = moved ? "(moved)" : "(deleted)";
  const unreadable = (session: Prisma.Sql) =>
    moved ? Prisma.sql`AND NOT EXISTS (SELECT 1 FROM chat_sessions s JOIN hub_members hm ON hm.user_id = s.owner_id AND hm.hub_id = ${moved.toHubId}::uuid WHERE s.id = ${session})` : Prisma.empty;
  await tx.$executeRaw`
    UPDATE chat_messages SET tool_calls = chat_scrub_memory_titles(tool_calls, ${memoryIds}::text[], ${chatTitle}::text), citations = chat_scrub_memory_titles(citations, ${memoryIds}::text[], ${chatTitle}::text)
     WHERE (chat_named_memory_ids(tool_calls) || chat_named_memory_ids(citations)) && ${memoryIds}::text[] ${unreadable(Prisma.sql`chat_messages.session_id`)}`;
  await tx.$executeRaw`
    UPDATE chat_events SET data = chat_scrub_memory_titles(data, ${memoryIds}::text[], ${chatTitle}::text)
     WHERE chat_named_memory_ids(data) && ${memoryIds}::text[]
       ${unreadable(Prisma.sql`(SELECT m.session_id FROM chat_messages m WHERE m.id = chat_events.message_id)`)}`;
  if (closed.length) {
    await tx.notification.updateMany({
      where: { kind: "review_contradiction", sourceId: { in: closed.map((row) => row.id) }, status: "pending" },
      data: { status: "expired", resolvedAt: now },
    });
  }
  await tx.$executeRaw`
    WITH gone AS (
      DELETE FROM custom_board_card_versions v WHERE v.cite_memory_ids && ${memoryIds}::uuid[]
         ${moved ? Prisma.sql`AND EXISTS (SELECT 1 FROM custom_boards b WHERE b.id = v.board_id AND b.hub_id <> ${moved.toHubId}::uuid)` : Prisma.empty}
      RETURNING board_id, content_produced_at)
    DELETE FROM custom_board_feedback f USING gone WHERE f.board_id = gone.board_id AND f.content_produced_at = gone.content_produced_at`;
  const emptied = await tx.$queryRaw<{ id: string; status: string }[]>`
    WITH old AS (
      SELECT id, card_content_updated_at FROM custom_boards WHERE card_cite_memory_ids && ${memoryIds}::uuid[] ${elsewhere("hub_id")} FOR UPDATE
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
