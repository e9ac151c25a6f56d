import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { sseResponse } from "@/lib/api/sse.ts";
import { getDatabase } from "@/lib/db/database.ts";
import { credentialReaches, membershipOrThrow, readableHubs } from "@/lib/hubs/hub-access.ts";
import { eventBus } from "./event-bus.ts";
import { eventData, EVENT_TYPES, type EventRecord, type EventType } from "./event-types.ts";
import { eventsRetentionMs } from "./prune-events.ts";

export const PING_INTERVAL_MS = 25_000;
/** Rows read per replay query; a replay pages through everything missed within retention. */
const REPLAY_PAGE = 500;

export interface EventStreamInput {
  hubId?: string;
  /** Exact names or prefixes ("memory.*"); absent: everything. */
  types?: string[];
  /** The seq of the last event the client saw (`Last-Event-ID`). */
  lastEventId?: string;
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
 * GET /v1/events/stream: `ready`, then every event the caller may see (live,
 * and first those after `Last-Event-ID` when resuming), a `ping` every 25 s.
 * Each event carries `id: <seq>` for resuming.
 */
export async function openEventStream(ctx: AuthContext, input: EventStreamInput): Promise<Response> {
  // A hub the caller cannot read is not found, whatever else is wrong with the request.
  if (input.hubId) await membershipOrThrow(ctx, input.hubId);
  const types = parseTypes(input.types);
  const resumeFrom = input.lastEventId && /^\d{1,19}$/.test(input.lastEventId.trim()) ? BigInt(input.lastEventId.trim()) : null;
  const database = await getDatabase();
  const userId = ctx.user.id;
  const accepts = (event: { type: string; hub_id: string | null }) =>
    (!types || types.has(event.type as EventType)) &&
    (!input.hubId || event.hub_id === null || event.hub_id === input.hubId) &&
    (event.hub_id === null || credentialReaches(ctx.credential, event.hub_id));

  return sseResponse(async (sse) => {
    let lastSeq = resumeFrom ?? 0n;
    let chain: Promise<void> = Promise.resolve();
    const enqueue = (task: () => Promise<void> | void) => {
      chain = chain.then(task).catch((error: unknown) => {
        console.error(`[${ctx.requestId}] event stream: delivery failed`, error);
        sse.close();
      });
    };
    const deliver = (event: EventRecord) => {
      const seq = BigInt(event.seq);
      if (seq <= lastSeq) return;
      lastSeq = seq;
      sse.send(event.type, eventData(event), event.seq);
    };
    const replay = async () => {
      const hubs = (await readableHubs(ctx)).map((m) => m.hub.id);
      const since = new Date(Date.now() - eventsRetentionMs());
      for (;;) {
        const rows = await ctx.db.event.findMany({
          where: {
            seq: { gt: lastSeq },
            createdAt: { gte: since },
            ...(types && { type: { in: [...types] } }),
            ...(input.hubId && { OR: [{ hubId: input.hubId }, { hubId: null }] }),
            AND: [{ OR: [{ userIds: { has: userId } }, { hubId: { in: hubs }, userIds: { isEmpty: true } }] }],
          },
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
      }
    };

    const unsubscribe = await eventBus(database).subscribe({
      userId,
      accepts,
      deliver: (event) => enqueue(() => deliver(event)),
      resync: () => enqueue(replay),
    });
    const ping = setInterval(() => sse.send("ping", { time: new Date().toISOString() }), PING_INTERVAL_MS);
    sse.signal.addEventListener("abort", () => {
      clearInterval(ping);
      unsubscribe();
    });
    if (sse.closed) {
      clearInterval(ping);
      unsubscribe();
      return;
    }
    sse.send("ready", { user_id: userId, hub_id: input.hubId ?? null, types: types ? [...types] : null, resumed_after: resumeFrom?.toString() ?? null });
    if (resumeFrom !== null) enqueue(replay);
  });
}
