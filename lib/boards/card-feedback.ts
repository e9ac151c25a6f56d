import type { DbClient } from "@/lib/db/database.ts";

export const VERDICTS = ["accurate", "inaccurate"] as const;
export type Verdict = (typeof VERDICTS)[number];

/** The verdicts on one content of a board's card: how many members said each, and the caller's own. */
export interface CardFeedback {
  accurate: number;
  inaccurate: number;
  my_verdict?: Verdict;
}

const key = (at: Date) => at.getTime();

/**
 * The verdicts on the given contents of a board's card (the live card's `cardContentUpdatedAt`, a
 * version's `contentProducedAt`), by content time. Counted in the database, so a hub of many members
 * costs one row per content and verdict.
 */
export async function cardFeedback(db: DbClient, boardId: string, userId: string, contents: Date[]): Promise<Map<number, CardFeedback>> {
  const result = new Map<number, CardFeedback>(contents.map((at) => [key(at), { accurate: 0, inaccurate: 0 }]));
  if (contents.length === 0) return result;
  const where = { boardId, contentProducedAt: { in: contents } };
  const [counts, mine] = await Promise.all([
    db.customBoardFeedback.groupBy({ by: ["contentProducedAt", "verdict"], where, _count: { _all: true } }),
    db.customBoardFeedback.findMany({ where: { ...where, userId }, select: { contentProducedAt: true, verdict: true } }),
  ]);
  for (const row of counts) {
    const tally = result.get(key(row.contentProducedAt));
    if (tally && (row.verdict === "accurate" || row.verdict === "inaccurate")) tally[row.verdict] = row._count._all;
  }
  for (const row of mine) {
    const tally = result.get(key(row.contentProducedAt));
    if (tally) tally.my_verdict = row.verdict as Verdict;
  }
  return result;
}

/** The verdicts on a board's live card (none while it has no card). */
export async function liveCardFeedback(db: DbClient, board: { id: string; cardContentUpdatedAt: Date | null }, userId: string): Promise<CardFeedback | undefined> {
  if (!board.cardContentUpdatedAt) return undefined;
  return (await cardFeedback(db, board.id, userId, [board.cardContentUpdatedAt])).get(key(board.cardContentUpdatedAt));
}
