/** Every event the stream carries (decisions.md "Events"). */
export const EVENT_TYPES = [
  "memory.created",
  "memory.updated",
  "memory.processed",
  "memory.deleted",
  "hub.updated",
  "hub.deleted",
  "member.added",
  "member.updated",
  "member.removed",
  "invite.accepted",
  "transfer.created",
  "transfer.accepted",
  "transfer.canceled",
  "topic.changed",
  "dream.completed",
  "notification.created",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** A stored event as it travels (NOTIFY payload, replay row). */
export interface EventRecord {
  id: string;
  seq: string;
  type: EventType;
  hub_id: string | null;
  actor_id: string | null;
  entity_id: string | null;
  created_at: string;
  /** Non-empty: exactly these users receive it, whatever their memberships. */
  user_ids: string[];
}

/** The `data:` of a delivered event. */
export function eventData(event: EventRecord) {
  return {
    id: event.id,
    type: event.type,
    hub_id: event.hub_id,
    actor_id: event.actor_id,
    entity_id: event.entity_id,
    created_at: event.created_at,
  };
}

export const EVENTS_CHANNEL = "engram_events";
