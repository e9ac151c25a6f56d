import { getDatabase } from "@/lib/db/database.ts";
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
 * dream run. If this process stops first, that dream run writes it.
 *
 * One refresh per board at a time: a kick while one runs only asks for one more after it. A refresh
 * reads the board when it starts, so that one answers the latest instruction; without this, every
 * rewrite of an instruction (a PATCH at the regular rate) started an answer of its own, each asking
 * the chat model, all but the last written for nothing.
 */
export function kickCustomBoard(boardId: string): void {
  const current = refreshing.get(boardId);
  if (current) {
    current.again = true;
    return;
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
}

/** Resolves once the refreshes started in this process have ended (tests). */
export async function customBoardsIdle(): Promise<void> {
  while (running.size) await Promise.all([...running]);
}
