import { askModelTimeoutMs } from "@/lib/ask/model-answer.ts";
import { getDatabase, type Database } from "@/lib/db/database.ts";
import { refreshCustomBoard } from "./refresh-custom-board.ts";

interface Refreshing {
  again: boolean;
  /** The dream run the next answer is written for (null: a kick of the board itself). */
  dreamRunId: string | null;
  /** The refresh itself, ending once no kick asks for one more: what a caller that must wait for its answer awaits. */
  job?: Promise<unknown>;
}

/** A start-up's claim of a cooking board: the stamp it wrote in card_asked_at, over the value it replaced. */
interface Claim {
  stamp: Date;
  previous: Date | null;
}

interface AfterDreams {
  waiting: Map<string, string>;
  draining?: Promise<void>;
}

const globalForBoards = globalThis as unknown as {
  __engramBoardRefreshes?: Set<Promise<unknown>>;
  __engramBoardRefreshing?: Map<string, Refreshing>;
  __engramBoardsAfterDreams?: AfterDreams;
  __engramBoardsStopping?: { stopping: boolean };
  __engramBoardClaims?: Map<string, Claim>;
};
const running = (globalForBoards.__engramBoardRefreshes ??= new Set());
/** Boards with a refresh running in this process, and whether they were kicked again meanwhile. */
const refreshing = (globalForBoards.__engramBoardRefreshing ??= new Map());
/** Boards dream runs asked to refresh, in the order asked (board id → the latest run), and the one drain asking them. */
const afterDreams = (globalForBoards.__engramBoardsAfterDreams ??= { waiting: new Map<string, string>() });
/** Set by a graceful stop: the queues take no new board, and no board is asked once more. */
const lifecycle = (globalForBoards.__engramBoardsStopping ??= { stopping: false });
/** Cooking boards this process claimed whose answer has not been written yet (given back by a stop). */
const claims = (globalForBoards.__engramBoardClaims ??= new Map<string, Claim>());

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
function refreshInBackground(boardId: string, dreamRunId: string | null = null): Promise<unknown> | undefined {
  const current = refreshing.get(boardId);
  if (current) {
    current.again = true;
    // The latest kick's: the refresh after this one answers what that kick asked (a rewrite's answer is no run's).
    current.dreamRunId = dreamRunId;
    return undefined;
  }
  const state: Refreshing = { again: false, dreamRunId };
  refreshing.set(boardId, state);
  const job = (async () => {
    try {
      const database = await getDatabase();
      for (;;) {
        state.again = false;
        // A claim made before this answer began is answered by it (it reads the board when it starts).
        const claim = claims.get(boardId);
        await refreshCustomBoard(database, boardId, state.dreamRunId).catch((error: unknown) =>
          console.error(`[engram] boards: board ${boardId} could not be written now; the next dream run writes it`, error),
        );
        if (claim && claims.get(boardId) === claim) claims.delete(boardId);
        // Checked and released in one step, so a kick now either sees the board free or is run here.
        // Once stopping, a board kicked again meanwhile is left to the next start-up (it is cooking) or dream run.
        if (!state.again || lifecycle.stopping) return;
      }
    } catch (error) {
      console.error(`[engram] boards: board ${boardId} could not be written now; the next dream run writes it`, error);
    } finally {
      refreshing.delete(boardId);
    }
  })().finally(() => running.delete(job));
  state.job = job;
  running.add(job);
  return job;
}

/**
 * A dream run's answer of one board, awaited (the Inngest dream function's board steps): through the
 * same one-refresh-per-board guard as a kick. Called directly, a step answered the board at the same
 * time as a kick of it in this process, the chat model asked twice and the first answer written for
 * nothing. A refresh already running answers once more, for this run, and the step waits for that.
 */
export async function refreshBoardForDream(boardId: string, dreamRunId: string): Promise<void> {
  await (refreshInBackground(boardId, dreamRunId) ?? refreshing.get(boardId)?.job);
}

/**
 * After a dream run: every board of its hub that is not paused is answered again, in the background.
 * Awaited by the run, ten boards of up to ENGRAM_ASK_MODEL_TIMEOUT_MS each held the process's one dream
 * worker for half an hour, every other hub's run queued behind them. Boards of every run wait in one
 * queue, asked one at a time, so runs ending together do not put all their questions to the chat model
 * at once; a board asked again before its turn keeps its place and is written for the latest run. If
 * this process stops first, the hub's next dream run writes them.
 */
export async function kickBoardsAfterDream(database: Database, hubId: string, dreamRunId: string): Promise<void> {
  const boards = await database.prisma.customBoard.findMany({ where: { hubId, status: { not: "paused" } }, orderBy: { id: "asc" }, select: { id: true } });
  for (const board of boards) afterDreams.waiting.set(board.id, dreamRunId);
  drainAfterDreams();
}

function drainAfterDreams(): void {
  if (lifecycle.stopping) afterDreams.waiting.clear();
  if (afterDreams.draining || afterDreams.waiting.size === 0) return;
  const job = (async () => {
    for (let next = afterDreams.waiting.entries().next(); !next.done && !lifecycle.stopping; next = afterDreams.waiting.entries().next()) {
      const [boardId, runId] = next.value;
      afterDreams.waiting.delete(boardId);
      await refreshInBackground(boardId, runId);
    }
  })()
    .catch((error: unknown) => console.error("[engram] boards: boards could not be refreshed after a dream run; the next dream run writes them", error))
    .finally(() => {
      afterDreams.draining = undefined;
      running.delete(job);
      // Boards queued between the loop's last look and now.
      drainAfterDreams();
    });
  afterDreams.draining = job;
  running.add(job);
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
  // A start-up: whatever a stop before it (tests) left, boards are taken again.
  lifecycle.stopping = false;
  const job = (async () => {
    for (let i = 0; i < COOKING_BOARDS_PER_START && !lifecycle.stopping; i++) {
      const boardId = await claimCookingBoard(database);
      // Claimed as the stop began: left for the stop to give back.
      if (!boardId || lifecycle.stopping) return;
      await refreshInBackground(boardId);
    }
  })()
    .catch((error: unknown) => console.error("[engram] boards: the cooking boards could not be asked again at start-up; their next dream run writes them", error))
    .finally(() => running.delete(job));
  running.add(job);
}

/**
 * The next cooking board to ask, claimed by stamping card_asked_at: every process starting on the
 * database kicked the same boards, each asking the chat model for all of them. A board another kick
 * is answering (locked, or stamped within CLAIM_MS) is passed over; a claim older than that is one
 * whose process stopped or whose refresh left the board cooking, and is taken again.
 */
async function claimCookingBoard(database: Database): Promise<string | null> {
  // The app's clock, as the refresh's own asked time is: a database clock ahead of it would make the
  // refresh take its answer for older than this stamp and drop it. Raw, so updated_at stays.
  const now = new Date();
  // A refresh asks the model up to three times (a cited memory deleted meanwhile) within its time bound each.
  const claimedSince = new Date(now.getTime() - 3 * askModelTimeoutMs() - 60_000);
  // The stamp it replaces comes back too, for a stop to put back (releaseBoardClaims).
  const rows = await database.prisma.$queryRaw<{ id: string; previous: Date | null }[]>`
    WITH picked AS (
      SELECT b.id, b.card_asked_at FROM custom_boards b JOIN hubs h ON h.id = b.hub_id AND h.deleted_at IS NULL
       WHERE b.status = 'cooking' AND (b.card_asked_at IS NULL OR b.card_asked_at < ${claimedSince})
       -- Least lately asked first: a board a refresh leaves as it is (its creator left the hub, the
       -- ask fails) kept its place at the head, and once fifty of those stood there no other was asked.
       ORDER BY b.card_asked_at ASC NULLS FIRST, b.updated_at ASC, b.id ASC
       LIMIT 1 FOR UPDATE OF b SKIP LOCKED)
    UPDATE custom_boards c SET card_asked_at = ${now} FROM picked WHERE c.id = picked.id
    RETURNING c.id::text AS id, picked.card_asked_at AS previous`;
  const row = rows[0];
  if (!row) return null;
  claims.set(row.id, { stamp: now, previous: row.previous });
  return row.id;
}

/**
 * A graceful stop's last step before the database closes: the cooking boards this process claimed and
 * did not answer (cut short, or claimed as the stop began) get their card_asked_at back. The claim kept
 * every other start-up off them for 3 × ENGRAM_ASK_MODEL_TIMEOUT_MS + 60 s, so a rolling restart within
 * that time left them cooking until their hub's next dream run. Only where the stamp is still this
 * claim's: an answer written or another claim since stands.
 */
export async function releaseBoardClaims(database: Database): Promise<void> {
  for (const [boardId, claim] of claims) {
    claims.delete(boardId);
    // The cut-short answer may hold the row in its write, itself waiting on a lock: the stop waits a second
    // at most for it, and that board keeps its claim.
    await database.prisma
      .$transaction(async (tx) => {
        await tx.$executeRaw`SET LOCAL lock_timeout = '1s'`;
        await tx.$executeRaw`
          UPDATE custom_boards SET card_asked_at = ${claim.previous}
           WHERE id = ${boardId}::uuid AND status = 'cooking' AND card_asked_at = ${claim.stamp}`;
      })
      .catch((error: unknown) =>
        console.error(`[engram] boards: the start-up's claim on board ${boardId} could not be given back; it is asked again once the claim is old`, error),
      );
  }
}

/**
 * A graceful stop's first step: the start-up's and the dream runs' queues take no new board (each
 * kept taking boards through the stop, so with three cooking boards, or a run's ten, the stop waited
 * out its grace and closed the database under the next one's answer). The boards they leave are
 * cooking (the next start-up asks them) or asked by their hub's next dream run. Answers on their way
 * go on; customBoardsIdle waits for them.
 */
export function stopCustomBoards(): void {
  lifecycle.stopping = true;
  afterDreams.waiting.clear();
}

/** Whether a graceful stop has begun: no board is taken from then on (the Inngest dream function's steps ask). */
export function customBoardsStopping(): boolean {
  return lifecycle.stopping;
}

/** Resolves once the refreshes started in this process have ended (tests; a stop, once no queue takes a new board). */
export async function customBoardsIdle(): Promise<void> {
  while (running.size) await Promise.all([...running]);
}
