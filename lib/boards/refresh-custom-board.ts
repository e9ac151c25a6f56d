import { randomUUID } from "node:crypto";
import { FULL_ACCESS, type AuthContext } from "@/lib/api/context.ts";
import { askQuestion } from "@/lib/ask/ask-question.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { hubMembersLockKey } from "@/lib/hubs/hub-access.ts";
import type { Database } from "@/lib/db/database.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import { newId } from "@/lib/ids.ts";
import { CARD_VERSIONS_KEPT, customBoardLockKey } from "./custom-board-fields.ts";

/**
 * Writes a custom board's card: its instruction asked of the hub's memories, as ask answers it (the
 * extractive answer, or the chat model's), read with the board creator's access. A board whose
 * creator can no longer read the hub is left as it is. The card changes only when the answer
 * does; the content it replaces becomes a version, and a card that changed is fresh again. Two
 * refreshes at once write in the order they began asking: the older answer never replaces the newer.
 */
export async function refreshCustomBoard(database: Database, boardId: string, dreamRunId: string | null = null, tries = 3): Promise<"written" | "unchanged" | "skipped"> {
  const db = database.prisma;
  const board = await db.customBoard.findUnique({ where: { id: boardId } });
  if (!board || board.status === "paused") return "skipped";
  const member = await db.hubMember.findUnique({ where: { hubId_userId: { hubId: board.hubId, userId: board.createdBy } }, include: { user: true } });
  if (!member) return "skipped";
  const ctx: AuthContext = {
    db,
    sql: database.sql,
    dbKind: database.kind,
    requestId: `board-${randomUUID()}`,
    now: () => new Date(),
    user: { id: member.user.id, email: member.user.email, name: member.user.name ?? "" },
    credential: { type: "session", ...FULL_ACCESS },
  };
  const askedAt = new Date();
  const asked = await askQuestion(ctx, { query: board.instruction, hub_ids: [board.hubId], count_access: false });
  const payload = { instruction: board.instruction, answer: asked.answer, citations: asked.citations, model: asked.metadata.model };
  const cited = asked.citations.map((c) => c.memory_id);
  const CITED_GONE = "cited_gone" as const;
  const result = await db.$transaction(async (tx) => {
    await lockForTransaction(tx, customBoardLockKey(board.id));
    const current = await tx.customBoard.findUnique({ where: { id: board.id } });
    // Deleted, paused or rewritten while the answer was written: this answer is for nothing that stands.
    if (!current || current.status === "paused" || current.instruction !== board.instruction) return "skipped";
    // A refresh that began asking later has written (or confirmed) the card already.
    if (current.cardAskedAt && current.cardAskedAt > askedAt) return "skipped";
    // The members lock before any memory, as every writer takes them (commitBatch in run-dream.ts): an
    // account-data deletion holds it exclusively, then locks every memory of the hub, so cited memories
    // held first made a cycle with it that PostgreSQL broke by failing one of the two.
    await lockForTransaction(tx, { shared: hubMembersLockKey(board.hubId) });
    // The answer quotes what it cites: a memory hard-deleted, or moved to another hub, while it was written
    // must not come back in the card (for this hub's members to read), so it is asked again without it.
    // Held until commit, so a delete or move now waits for this card and then empties it
    // (lib/memories/drop-memory-copies.ts): both lock the rows FOR UPDATE first, which KEY SHARE blocks.
    const citedIds = [...new Set(cited)];
    if (citedIds.length) {
      const still = await tx.$queryRaw<{ id: string }[]>`
        SELECT id::text AS id FROM memories WHERE id = ANY(${citedIds}::uuid[]) AND hub_id = ${board.hubId}::uuid FOR KEY SHARE`;
      if (still.length < citedIds.length) return CITED_GONE;
    }
    // The creator lost the hub while the answer was written (it may then say "nothing found"): leave the board.
    if (!(await tx.hubMember.findUnique({ where: { hubId_userId: { hubId: board.hubId, userId: board.createdBy } }, select: { role: true } }))) return "skipped";
    const previous = current.cardPayload as { answer?: string } | null;
    const now = new Date();
    if (previous?.answer === payload.answer) {
      // Only the ask's time is new: the board's updated_at stays, unless it stops cooking.
      await tx.customBoard.update({
        where: { id: board.id },
        data: { cardAskedAt: askedAt, ...(current.status === "cooking" ? { status: "active" } : { updatedAt: current.updatedAt }) },
      });
      return "unchanged";
    }
    if (current.cardPayload && current.cardContentUpdatedAt) {
      await tx.customBoardCardVersion.create({
        data: {
          id: newId(now.getTime()),
          boardId: board.id,
          payload: current.cardPayload as Prisma.InputJsonValue,
          citeMemoryIds: current.cardCiteMemoryIds,
          dreamRunId: current.cardDreamRunId,
          contentProducedAt: current.cardContentUpdatedAt,
          createdAt: now,
        },
      });
      const old = await tx.customBoardCardVersion.findMany({
        where: { boardId: board.id },
        orderBy: { createdAt: "desc" },
        skip: CARD_VERSIONS_KEPT,
        select: { id: true, contentProducedAt: true },
      });
      if (old.length) {
        await tx.customBoardCardVersion.deleteMany({ where: { id: { in: old.map((v) => v.id) } } });
        // The verdicts on an answer no longer kept go with it.
        await tx.customBoardFeedback.deleteMany({ where: { boardId: board.id, contentProducedAt: { in: old.map((v) => v.contentProducedAt) } } });
      }
    }
    await tx.customBoard.update({
      where: { id: board.id },
      data: {
        status: "active",
        cardPayload: payload as unknown as Prisma.InputJsonValue,
        cardCiteMemoryIds: cited,
        cardState: "fresh",
        cardResolution: Prisma.DbNull,
        cardDreamRunId: dreamRunId,
        cardContentUpdatedAt: now,
        cardCreatedAt: current.cardCreatedAt ?? now,
        cardAskedAt: askedAt,
      },
    });
    return "written";
  });
  if (result !== CITED_GONE) return result;
  return tries > 1 ? refreshCustomBoard(database, boardId, dreamRunId, tries - 1) : "skipped";
}
