import { getDatabase, type Database } from "@/lib/db/database.ts";
import { refreshCustomBoard } from "./refresh-custom-board.ts";

const globalForBoards = globalThis as unknown as {
  __engramBoardRefreshes?: Set<Promise<unknown>>;
  __engramBoardRefreshing?: Map<string, { again: boolean }>;
};
const running = (globalForBoards.__engramBoardRefreshes ??= new Set());
/** Boards with a refresh running in this process, and whether they were kicked again meanwhile. */
const refreshing = (globalForBoards.__engramBoardRefreshing ??= new Map());

/**
 * Writes a new or rewritten board's first card in the background, so it does not wait for the next
 * dream run. If this process stops first, the next start-up (kickCookingBoards) or that dream run writes it.
 *
 * One refresh per board at a time: a kick while one runs only asks for one more after it. A refresh
 * reads the board when it starts, so that one answers the latest instruction; without this, every
 * rewrite of an instruction (a PATCH at the regular rate) started an answer of its own, each asking
 * the chat model, all but the last written for nothing.
 */
export function kickCustomBoard(boardId: string): void {
  void refreshInBackground(boardId);
}

/** The refresh kickCustomBoard starts, to wait for; none when one was running already (it runs once more). */
function refreshInBackground(boardId: string): Promise<unknown> | undefined {
  const current = refreshing.get(boardId);
  if (current) {
    current.again = true;
    return undefined;
  }
  const state = { again: false };
  refreshing.set(boardId, state);
  const job = (async () => {
    try {
      const database = await getDatabase();
      for (;;) {
        state.again = false;
        await refreshCustomBoard(database, boardId).catch((error: unknown) =>
          console.error(`[engram] boards: board ${boardId} could not be written now; the next dream run writes it`, error),
        );
        // Checked and released in one step, so a kick now either sees the board free or is run here.
        if (!state.again) return;
      }
    } catch (error) {
      console.error(`[engram] boards: board ${boardId} could not be written now; the next dream run writes it`, error);
    } finally {
      refreshing.delete(boardId);
    }
  })().finally(() => running.delete(job));
  running.add(job);
  return job;
}

/** Boards a start-up asks again, those least lately asked first; the rest wait for the next start-up or their hub's dream run. */
export const COOKING_BOARDS_PER_START = 50;

/**
 * At start-up: boards left cooking with nothing asking them (a kick lost when its process stopped,
 * or a card the delete clean-up migration emptied) waited for their hub's next dream run, which may
 * be a day away, or never come with dreams off. Asked one after another in the background, so a
 * start-up does not put fifty questions to the chat model at once.
 */
export function kickCookingBoards(database: Database): void {
  const job = (async () => {
    const boards = await database.prisma.customBoard.findMany({
      // A hub marked deleted is being purged: its boards go with it, asking them is for nothing.
      where: { status: "cooking", hub: { deletedAt: null } },
      // Least lately asked first: a board a refresh leaves as it is (its creator left the hub, the ask
      // fails) kept its place at the head, and once fifty of those stood there no other was ever asked.
      orderBy: [{ cardAskedAt: { sort: "asc", nulls: "first" } }, { updatedAt: "asc" }, { id: "asc" }],
      take: COOKING_BOARDS_PER_START,
      select: { id: true },
    });
    for (const board of boards) {
      // Stamped on every attempt, whatever the refresh does, so the next start-up asks the others first.
      // The app's clock, as the refresh's own asked time is: a database clock ahead of it would make the
      // refresh below take its answer for older than this stamp and drop it. Raw, so updated_at stays.
      await database.prisma.$executeRaw`UPDATE custom_boards SET card_asked_at = ${new Date()} WHERE id = ${board.id}::uuid AND status = 'cooking'`;
      await refreshInBackground(board.id);
    }
  })()
    .catch((error: unknown) => console.error("[engram] boards: the cooking boards could not be asked again at start-up; their next dream run writes them", error))
    .finally(() => running.delete(job));
  running.add(job);
}

/** Resolves once the refreshes started in this process have ended (tests). */
export async function customBoardsIdle(): Promise<void> {
  while (running.size) await Promise.all([...running]);
}
