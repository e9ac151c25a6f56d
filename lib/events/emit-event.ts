import type { DbClient } from "@/lib/db/database.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import { newId } from "@/lib/ids.ts";
import { EVENTS_CHANNEL, type EventType } from "./event-types.ts";

export interface EmitEventInput {
  type: EventType;
  hubId?: string | null;
  actorId?: string | null;
  entityId?: string | null;
  /** Deliver to exactly these users instead of the hub's members (hub.deleted, notification.created). */
  userIds?: string[];
}

/** Arbitrary constant key of the transaction-scoped lock that orders event numbers by commit. */
const EVENTS_LOCK = 0x656e6772;

/**
 * The statement that records events (one row each) and NOTIFYs them; for a
 * batch transaction: `db.$transaction([db.memory.update(…), eventsStatement(db, […])])`.
 */
export function eventsStatement(db: DbClient, events: EmitEventInput | EmitEventInput[]) {
  return db.$queryRaw`
    WITH ${eventsCtes(events)}
    SELECT notified FROM notified`;
}

/**
 * The CTEs that record events and NOTIFY them (`notified`, one row per event in seq order): the
 * lock that orders seq by commit, the insert, the notification.
 */
function eventsCtes(events: EmitEventInput | EmitEventInput[], when: Prisma.Sql = Prisma.sql`true`): Prisma.Sql {
  const rows = (Array.isArray(events) ? events : [events]).map((event) => ({
    id: newId(),
    type: event.type,
    hub_id: event.hubId ?? null,
    actor_id: event.actorId ?? null,
    entity_id: event.entityId ?? null,
    user_ids: event.userIds ?? [],
  }));
  return Prisma.sql`locked AS (SELECT pg_advisory_xact_lock(${EVENTS_LOCK}::bigint) AS ok WHERE ${when}),
    inserted AS (
      INSERT INTO events (id, type, hub_id, actor_id, entity_id, user_ids, created_at)
      SELECT (e.item->>'id')::uuid, e.item->>'type', (e.item->>'hub_id')::uuid, (e.item->>'actor_id')::uuid, e.item->>'entity_id',
             ARRAY(SELECT json_array_elements_text(e.item->'user_ids'))::uuid[], clock_timestamp()
      FROM locked, json_array_elements(${JSON.stringify(rows)}::json) WITH ORDINALITY AS e(item, ord)
      ORDER BY e.ord
      RETURNING id, seq, type, hub_id, actor_id, entity_id, user_ids,
                to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at
    ),
    notified AS (
      SELECT pg_notify(${EVENTS_CHANNEL}, json_build_object(
               'id', id, 'seq', seq::text, 'type', type, 'hub_id', hub_id, 'actor_id', actor_id,
               'entity_id', entity_id, 'user_ids', user_ids, 'created_at', created_at)::text)::text AS notified
      FROM inserted ORDER BY seq
    )`;
}

/**
 * emitEvent with a read of the write's results in the same statement (one round trip for a push's
 * quota read and its event, issue 16): `read`, a SELECT, runs first on the statement's snapshot, and
 * its rows are returned. `refusedIf`, a condition on a row `r` of the read, records no event (and takes
 * no events lock) when a row meets it: the lock is server-wide, and a write about to be refused held it
 * through its refusal's reads and its rollback, holding up every write that records an event. A caller
 * that refuses on the rows throws; one that does not after all (`emitted` false) records the events itself.
 */
export async function emitEventAfterRead<T>(
  tx: DbClient,
  events: EmitEventInput | EmitEventInput[],
  read: Prisma.Sql,
  refusedIf: Prisma.Sql = Prisma.sql`false`,
): Promise<{ rows: T[]; emitted: boolean }> {
  const [row] = await tx.$queryRaw<{ rows: T[] | string; events: bigint | number }[]>`
    WITH was_read AS MATERIALIZED (${read}),
    ${eventsCtes(events, Prisma.sql`NOT EXISTS (SELECT 1 FROM was_read r WHERE ${refusedIf})`)}
    SELECT (SELECT coalesce(json_agg(r), '[]'::json) FROM was_read r) AS rows, (SELECT count(*) FROM notified) AS events`;
  // json as the driver gives it: parsed, or its text.
  const rows = row?.rows ?? [];
  return { rows: typeof rows === "string" ? (JSON.parse(rows) as T[]) : rows, emitted: Number(row?.events ?? 0) > 0 };
}

/**
 * Records events inside the caller's transaction — call it last there: it
 * holds a lock until commit. Written with the change it describes, or not at
 * all; subscribers hear of it through NOTIFY, which PostgreSQL (and PGlite)
 * deliver only when the transaction commits. The lock makes `seq` (the replay
 * cursor) increase in commit order, so a client resuming after seq N never
 * misses a smaller one that committed later.
 */
export async function emitEvent(tx: DbClient, events: EmitEventInput | EmitEventInput[]): Promise<void> {
  if (Array.isArray(events) && events.length === 0) return;
  await eventsStatement(tx, events);
}
