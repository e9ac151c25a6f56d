import type { Database } from "@/lib/db/database.ts";
import { EVENTS_CHANNEL, type EventRecord } from "./event-types.ts";

export interface EventSubscriber {
  userId: string;
  /** The subscriber's own filters (types, hub), before any access check. */
  accepts(event: EventRecord): boolean;
  /** Called in commit order with events the user can read now. */
  deliver(event: EventRecord): void;
  /** The listening connection was lost and is back: events may have been missed. */
  resync(): void;
}

/**
 * Events the bus may hold waiting for their membership check. Each waits for one query, so a burst
 * faster than the database answers piled up in memory without end; past this many, the streams an
 * event is for replay it from the table instead (from their last id, checking access themselves),
 * once, behind the events already waiting.
 */
export const MAX_PENDING_EVENTS = 1000;

/**
 * One LISTEN per process and database, fanned out to every open stream. Each
 * event is checked against current hub membership when it is delivered (one
 * query per event for all its candidate subscribers), so a member removed a
 * moment ago receives nothing more.
 */
export class EventBus {
  private readonly subscribers = new Set<EventSubscriber>();
  private readonly opening = new Map<string, number>();
  private listening?: Promise<void>;
  private queue: Promise<void> = Promise.resolve();
  /** Tasks in the queue, the one running included. */
  private pending = 0;
  /** Subscribers that missed events the queue had no room for: one replay each, queued once. */
  private readonly behind = new Set<EventSubscriber>();
  /**
   * The seq of the last event handed to every stream it was for (or found to be for none, or turned
   * into those streams' replay). Notifications come in commit order, which is seq order, so every event
   * up to it has been dealt with: a stream that has caught up may move its client's cursor this far.
   */
  handledThrough = 0n;
  /**
   * Events handled so far. handledThrough is only as fresh as the last event: restored in place (the
   * LISTEN connection kept), the database's ids start lower while it still holds an id of the lost
   * history until the next event, so a stream may use it only once this has moved since it subscribed.
   */
  handledCount = 0;

  constructor(private readonly database: Database) {}

  async subscribe(subscriber: EventSubscriber): Promise<() => void> {
    this.subscribers.add(subscriber);
    try {
      await this.start();
    } catch (error) {
      this.subscribers.delete(subscriber);
      throw error;
    }
    return () => {
      this.subscribers.delete(subscriber);
    };
  }

  get size(): number {
    return this.subscribers.size;
  }

  /** Streams this user has open in this process, counting those still opening. */
  countOf(userId: string): number {
    let n = this.opening.get(userId) ?? 0;
    for (const subscriber of this.subscribers) if (subscriber.userId === userId) n += 1;
    return n;
  }

  /**
   * Holds one of the user's `max` places from the check until the stream subscribes (or fails): a
   * stream awaits the database before it subscribes, and streams opened at once must not all pass a
   * count that none of them is in yet. Null when the places are taken; call the release once.
   */
  reserve(userId: string, max: number): (() => void) | null {
    if (this.countOf(userId) >= max) return null;
    this.opening.set(userId, (this.opening.get(userId) ?? 0) + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const left = (this.opening.get(userId) ?? 1) - 1;
      if (left > 0) this.opening.set(userId, left);
      else this.opening.delete(userId);
    };
  }

  private start(): Promise<void> {
    this.listening ??= this.database
      .listen(
        EVENTS_CHANNEL,
        (payload) => this.receive(payload),
        () => {
          // Events may have gone unheard, and the database may be another (restored, its ids lower).
          this.handledThrough = 0n;
          for (const subscriber of this.subscribers) subscriber.resync();
        },
      )
      .then(() => undefined)
      .catch((error: unknown) => {
        this.listening = undefined;
        throw error;
      });
    return this.listening;
  }

  private receive(payload: string): void {
    let event: EventRecord;
    try {
      event = JSON.parse(payload) as EventRecord;
    } catch {
      console.error("[engram] events: unreadable notification payload", payload.slice(0, 200));
      return;
    }
    if (this.pending >= MAX_PENDING_EVENTS) {
      const queued = this.behind.size > 0;
      for (const subscriber of this.subscribers) if (subscriber.accepts(event)) this.behind.add(subscriber);
      // Behind every event already waiting, so each stream's replay starts after what it was handed live.
      if (!queued && this.behind.size > 0) this.enqueue(() => this.resyncBehind());
      return;
    }
    this.enqueue(() =>
      this.dispatch(event)
        .catch((error: unknown) => {
          // The membership check failed (a database hiccup): the streams that wanted this event catch
          // up from the table instead of losing it; the replay checks access itself.
          console.error("[engram] events: delivery failed; the streams it was for replay", error);
          for (const subscriber of this.subscribers) if (subscriber.accepts(event)) subscriber.resync();
        })
        // The latest rather than the greatest: after a restore the ids start lower again.
        .finally(() => {
          this.handledThrough = BigInt(event.seq);
          this.handledCount += 1;
        }),
    );
  }

  /** Serial: deliveries keep commit order even though each waits for a membership check. */
  private enqueue(task: () => Promise<void>): void {
    this.pending += 1;
    this.queue = this.queue
      .then(task)
      // A rejected link would stop every later delivery.
      .catch((error: unknown) => console.error("[engram] events: delivery failed", error))
      .finally(() => {
        this.pending -= 1;
      });
  }

  private resyncBehind(): Promise<void> {
    const behind = [...this.behind];
    this.behind.clear();
    for (const subscriber of behind) if (this.subscribers.has(subscriber)) subscriber.resync();
    return Promise.resolve();
  }

  private async dispatch(event: EventRecord): Promise<void> {
    const candidates = [...this.subscribers].filter((s) => s.accepts(event));
    if (candidates.length === 0) return;
    const allowed = await this.audience(event, [...new Set(candidates.map((c) => c.userId))]);
    for (const subscriber of candidates) if (allowed.has(subscriber.userId)) subscriber.deliver(event);
  }

  private async audience(event: EventRecord, userIds: string[]): Promise<Set<string>> {
    if (event.user_ids?.length) return new Set(event.user_ids);
    if (!event.hub_id) return new Set();
    const rows = await this.database.prisma.hubMember.findMany({
      where: { hubId: event.hub_id, userId: { in: userIds } },
      select: { userId: true },
    });
    return new Set(rows.map((row) => row.userId));
  }
}

const buses = new WeakMap<Database, EventBus>();

/** The process's bus for this database. */
export function eventBus(database: Database): EventBus {
  let bus = buses.get(database);
  if (!bus) {
    bus = new EventBus(database);
    buses.set(database, bus);
  }
  return bus;
}
