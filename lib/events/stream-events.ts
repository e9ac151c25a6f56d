import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { sseHeadResponse, sseResponse, STREAM_FAILED } from "@/lib/api/sse.ts";
import { getDatabase } from "@/lib/db/database.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { credentialReaches, membershipOrThrow, membershipWhere } from "@/lib/hubs/hub-access.ts";
import { normalizeId } from "@/lib/ids.ts";
import { eventBus } from "./event-bus.ts";
import { eventData, EVENT_TYPES, type EventRecord, type EventType } from "./event-types.ts";
import { eventsRetainedSince } from "./prune-events.ts";

export const PING_INTERVAL_MS = 25_000;
/** Event streams one user may hold open in one server process (each tab of the dashboard is one). */
export const MAX_STREAMS_PER_USER = 20;
/**
 * Pings after which a stream that has sent its client no id moves the client's cursor past the events
 * it could not see (an hour; retention is at least 24 h). Without it, a client of a quiet hub in a busy
 * deployment kept the id of its last event until that aged out, and every reconnect then reported a
 * gap it did not have. Not at every ping: the cursor is a position in every tenant's one sequence, and
 * each one sent is another reading of the whole deployment's activity (see docs/ask-and-events.md).
 */
export const CURSOR_REFRESH_PINGS = 144;
/** Rows read per replay query; a replay pages through everything missed within retention. */
const REPLAY_PAGE = 500;

export interface EventStreamInput {
  hubId?: string;
  /** Exact names or prefixes ("memory.*"); absent: everything. */
  types?: string[];
  /** The seq of the last event the client saw (`Last-Event-ID`). */
  lastEventId?: string;
  /**
   * Checks the request's credential again (throws `unauthorized` once it is revoked or expired): a
   * stream outlives its opening request by hours, and a revoked key or grant must end it.
   */
  reauthenticate?: () => Promise<unknown>;
  /** A HEAD (Next runs GET for it): the checks, then the headers, without opening a stream. */
  head?: boolean;
}

/** Which event types a `types` filter selects; unknown names are a 400 so typos do not silently mute a stream. */
export function parseTypes(raw: string[] | undefined): Set<EventType> | null {
  if (!raw || raw.length === 0) return null;
  const selected = new Set<EventType>();
  for (const name of raw) {
    const matched = name.endsWith(".*") ? EVENT_TYPES.filter((t) => t.startsWith(name.slice(0, -1))) : EVENT_TYPES.filter((t) => t === name);
    if (matched.length === 0) {
      throw new ApiError("invalid_request", `Unknown event type "${name}"`, { issues: [{ path: "types", message: `known: ${EVENT_TYPES.join(", ")}` }] });
    }
    for (const type of matched) selected.add(type);
  }
  return selected;
}

/**
 * The events a stream shows its caller (within its filters), given the hubs the caller reads: a hub's
 * events only from when the caller joined it (a member since re-invited, or new, gets nothing of the
 * time they were not one), and only hubs the credential reaches, for the events addressed to the user
 * as well.
 */
function visibleEvents(ctx: AuthContext, memberships: { hubId: string; joinedAt: Date }[], types: Set<EventType> | null, hubId: string | undefined): Prisma.EventWhereInput {
  const reached = ctx.credential.hubIds === null ? {} : { OR: [{ hubId: null }, { hubId: { in: [...ctx.credential.hubIds] } }] };
  return {
    ...(types && { type: { in: [...types] } }),
    ...(hubId && { OR: [{ hubId }, { hubId: null }] }),
    AND: [
      {
        OR: [
          { userIds: { has: ctx.user.id }, ...reached },
          ...memberships.map((m) => ({ hubId: m.hubId, createdAt: { gte: m.joinedAt }, userIds: { isEmpty: true } })),
        ],
      },
    ],
  };
}

/** Live events a stream keeps while a replay runs, at most so many and so many bytes; past either, it replays once more instead. */
const MAX_BUFFERED_EVENTS = 1000;
const MAX_BUFFERED_BYTES = 256 * 1024;

/**
 * GET /v1/events/stream: `ready`, then every event the caller may see (live,
 * and first those after `Last-Event-ID` when resuming), a `ping` every 25 s.
 * Each event carries `id: <seq>` for resuming.
 */
export async function openEventStream(ctx: AuthContext, given: EventStreamInput): Promise<Response> {
  // Lowered as every id is where it enters: membershipOrThrow took an upper-case hub_id, but the live
  // filter compared it as text with the events' lower-case hub ids, so such a stream heard nothing of its hub.
  const input = { ...given, hubId: given.hubId && normalizeId(given.hubId) };
  // A hub the caller cannot read is not found, whatever else is wrong with the request.
  if (input.hubId) await membershipOrThrow(ctx, input.hubId);
  const types = parseTypes(input.types);
  const resumeFrom = input.lastEventId && /^\d{1,19}$/.test(input.lastEventId.trim()) ? BigInt(input.lastEventId.trim()) : null;
  if (input.head) return sseHeadResponse();
  const database = await getDatabase();
  const userId = ctx.user.id;
  const release = eventBus(database).reserve(userId, MAX_STREAMS_PER_USER);
  if (!release) {
    throw new ApiError("rate_limited", `At most ${MAX_STREAMS_PER_USER} event streams may be open at once; close one first`, {
      limit: MAX_STREAMS_PER_USER,
      retry_after: PING_INTERVAL_MS / 1000,
    }, { "Retry-After": String(PING_INTERVAL_MS / 1000) });
  }
  // A stream that does not resume starts now: a replay after the listening connection comes back
  // (resync) must not hand it the whole retention window as if it were new. A resume past the newest
  // event (an id from before the database was restored or reset, or a forged one, up to 19 digits and
  // past bigint) resumes from the newest: kept as it is, it stays silent until seq catches up, or
  // fails the replay's query and ends the stream, for good on every reconnect.
  //
  // `resumed_after` (in `ready`) is the id the replay really goes on from, so a client can tell what it
  // missed: a resume from before retention goes on past the events pruned since (or too old to replay),
  // which it never gets, rather than echo its Last-Event-ID as if nothing were lost.
  let startSeq: bigint;
  let resumedAfter: bigint | null = null;
  try {
    const newest = (await ctx.db.event.aggregate({ _max: { seq: true } }))._max.seq ?? 0n;
    startSeq = resumeFrom !== null && resumeFrom < newest ? resumeFrom : newest;
    if (resumeFrom !== null) {
      const oldestKept = (await ctx.db.event.aggregate({ where: { createdAt: { gte: eventsRetainedSince(new Date()) } }, _min: { seq: true } }))._min.seq;
      const replayableAfter = oldestKept === null ? newest : oldestKept - 1n;
      resumedAfter = startSeq > replayableAfter ? startSeq : replayableAfter;
      if (resumeFrom > newest) {
        // The newest event this stream would have shown is the same position for it (it sees nothing
        // in between); with none kept, 0 is. Not the server's newest, though that hides little: ids are
        // one sequence for every tenant, and whether an id comes back as sent already tells a caller if
        // it is below the newest (docs/ask-and-events.md, "Event ids are not private").
        const memberships = await ctx.db.hubMember.findMany({ where: membershipWhere(ctx), select: { hubId: true, joinedAt: true } });
        const shown = await ctx.db.event.aggregate({
          where: { seq: { lte: newest }, createdAt: { gte: eventsRetainedSince(new Date()) }, ...visibleEvents(ctx, memberships, types, input.hubId) },
          _max: { seq: true },
        });
        resumedAfter = shown._max.seq ?? 0n;
      }
    }
  } catch (error) {
    release();
    throw error;
  }
  const accepts = (event: { type: string; hub_id: string | null }) =>
    (!types || types.has(event.type as EventType)) &&
    (!input.hubId || event.hub_id === null || event.hub_id === input.hubId) &&
    (event.hub_id === null || credentialReaches(ctx.credential, event.hub_id));

  return sseResponse(async (sse) => {
    let lastSeq = startSeq;
    let chain: Promise<void> = Promise.resolve();
    const enqueue = (task: () => Promise<void> | void) => {
      chain = chain.then(task).catch((error: unknown) => {
        console.error(`[${ctx.requestId}] event stream: delivery failed`, error);
        // Said before it ends, as sseResponse does for a failure of its own: closed silently, the stream
        // looked to the client like a restart or a network cut, not a server failing.
        sse.send("error", STREAM_FAILED);
        sse.close();
      });
    };
    let pingsWithoutId = 0;
    const deliver = (event: EventRecord) => {
      const seq = BigInt(event.seq);
      if (seq <= lastSeq) return;
      lastSeq = seq;
      pingsWithoutId = 0;
      sse.send(event.type, eventData(event), event.seq);
    };
    // The hubs the caller read when the replay last looked (its per-page membership read).
    let memberOf = new Set<string>();
    const replayOnce = async () => {
      const since = eventsRetainedSince(new Date());
      for (;;) {
        // The memberships are read again for every page: a page waits for the client to read the one
        // before, and a member removed meanwhile must get nothing more of the hub.
        const memberships = await ctx.db.hubMember.findMany({ where: membershipWhere(ctx), select: { hubId: true, joinedAt: true } });
        memberOf = new Set(memberships.map((m) => m.hubId));
        const rows = await ctx.db.event.findMany({
          where: { seq: { gt: lastSeq }, createdAt: { gte: since }, ...visibleEvents(ctx, memberships, types, input.hubId) },
          orderBy: { seq: "asc" },
          take: REPLAY_PAGE,
        });
        for (const row of rows) {
          if (sse.closed) return;
          deliver({
            id: row.id,
            seq: row.seq.toString(),
            type: row.type as EventType,
            hub_id: row.hubId,
            actor_id: row.actorId,
            entity_id: row.entityId,
            created_at: row.createdAt.toISOString(),
            user_ids: row.userIds,
          });
        }
        if (rows.length < REPLAY_PAGE) return;
        // The next page once the client has read this one, so a long replay is not all held in memory.
        await sse.drained();
        if (sse.closed) return;
      }
    };
    const checkCredential = async () => {
      try {
        await input.reauthenticate?.();
      } catch (error) {
        // Only a definite refusal ends the stream; a database restart does not.
        if (!(error instanceof ApiError) || error.code !== "unauthorized") return;
        sse.send("error", { code: "unauthorized", message: error.message });
        sse.close();
      }
    };

    // Replays queued or running. A live event that arrives meanwhile waits in a small buffer, handed over
    // once the replay has caught up, and only if the caller still reads its hub by then (the memberships
    // the replay read last): the bus checked the membership when the event came, and a replay paused for
    // a client that stopped reading may last long enough for the caller to lose the hub meanwhile. Past
    // the buffer's bound the events are dropped and the replay goes round once more, reading them from
    // the table: a stalled stream holds at most that bound in memory, and a busy one returns to live
    // delivery as soon as a replay catches up.
    let replays = 0;
    let missed = false;
    let buffered: EventRecord[] = [];
    let bufferedBytes = 0;
    const replay = async () => {
      try {
        for (;;) {
          missed = false;
          buffered = [];
          bufferedBytes = 0;
          await replayOnce();
          if (sse.closed) return;
          if (missed) continue;
          const caughtUp = buffered;
          buffered = [];
          bufferedBytes = 0;
          // An event of a hub the replay's last memberships lack (joined since it read them) goes round
          // once more, read from the table with fresh ones, rather than be dropped: the bus let it through.
          if (caughtUp.some((event) => !event.user_ids?.length && event.hub_id !== null && !memberOf.has(event.hub_id))) continue;
          for (const event of caughtUp) deliver(event);
          return;
        }
      } finally {
        replays--;
      }
    };
    const queueReplay = () => {
      replays++;
      enqueue(replay);
    };
    const hold = (event: EventRecord) => {
      if (replays === 0) {
        enqueue(() => deliver(event));
      } else {
        const size = JSON.stringify(event).length;
        if (missed || buffered.length >= MAX_BUFFERED_EVENTS || bufferedBytes + size > MAX_BUFFERED_BYTES) {
          missed = true;
          buffered = [];
          bufferedBytes = 0;
        } else {
          buffered.push(event);
          bufferedBytes += size;
        }
      }
    };
    // An id the bus records from here on is of this database as the stream found it (see handledCount).
    const handledBefore = eventBus(database).handledCount;
    // subscribe counts the stream before its first await, so the reserved place can go at once.
    const subscribing = eventBus(database).subscribe({
      userId,
      accepts,
      deliver: hold,
      resync: queueReplay,
    });
    release();
    // A catch-up from the start before any live event, once listening: an event that committed after the
    // newest id was read and before this stream listened was heard by no one (for the process's first
    // stream, not before its LISTEN connection was made). First in the queue, so a live event after it
    // cannot move the cursor past it. Its failure is the await below's.
    replays++;
    enqueue(() => subscribing.then(replay, () => void replays--));
    const unsubscribe = await subscribing;
    const ping = setInterval(() => {
      const time = new Date().toISOString();
      if (++pingsWithoutId < CURSOR_REFRESH_PINGS) {
        sse.send("ping", { time });
      } else {
        // Read now and sent behind the deliveries queued so far, which include every event up to it
        // that this stream was handed; a replay queued or running may still owe some, so none then.
        // Only an id handled since this stream subscribed: one from before may be of a history since
        // restored away (ids higher than any now), and the cursor moved there dropped every new event.
        const bus = eventBus(database);
        const through = bus.handledCount > handledBefore ? bus.handledThrough : 0n;
        enqueue(() => {
          const moves = replays === 0 && through > lastSeq;
          if (moves) {
            lastSeq = through;
            pingsWithoutId = 0;
          }
          sse.send("ping", { time }, moves ? through.toString() : undefined);
        });
      }
      // Not queued behind deliveries: a replay waiting for a client that stopped reading would hold the
      // check back, and the client, once it read on, would get the replay's next pages on a revoked key.
      void checkCredential();
    }, PING_INTERVAL_MS);
    sse.signal.addEventListener("abort", () => {
      clearInterval(ping);
      unsubscribe();
    });
    if (sse.closed) {
      clearInterval(ping);
      unsubscribe();
      return;
    }
    sse.send("ready", { user_id: userId, hub_id: input.hubId ?? null, types: types ? [...types] : null, resumed_after: resumedAfter?.toString() ?? null });
  });
}
