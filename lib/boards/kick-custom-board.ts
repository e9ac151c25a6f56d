import { getDatabase } from "@/lib/db/database.ts";
import { refreshCustomBoard } from "./refresh-custom-board.ts";

const globalForBoards = globalThis as unknown as { __engramBoardRefreshes?: Set<Promise<unknown>> };
const running = (globalForBoards.__engramBoardRefreshes ??= new Set());

/**
 * Writes a new or rewritten board's first card in the background, so it does not wait for the next
 * dream run. If this process stops first, that dream run writes it.
 */
export function kickCustomBoard(boardId: string): void {
  const job = getDatabase()
    .then((database) => refreshCustomBoard(database, boardId))
    .catch((error: unknown) => console.error(`[engram] boards: board ${boardId} could not be written now; the next dream run writes it`, error))
    .finally(() => running.delete(job));
  running.add(job);
}

/** Resolves once the refreshes started in this process have ended (tests). */
export async function customBoardsIdle(): Promise<void> {
  while (running.size) await Promise.all([...running]);
}
