import type { DecisionGate, Hub } from "@/lib/db/generated/client.ts";

/** A decision gate's slot on its hub's board: `decision:<gate id>`. */
export const GATE_SLOT_PREFIX = "decision:";

export function gateSlotKey(gateId: string): string {
  return `${GATE_SLOT_PREFIX}${gateId}`;
}

export function gateOptions(gate: Pick<DecisionGate, "options">): { id: string; label: string }[] {
  return gate.options.map((label, i) => ({ id: String(i + 1), label }));
}

/** A hub's own board (Memax's system board), identified by its hub: it holds the hub's decision gates. */
export function serializeBoard(hub: Pick<Hub, "id" | "ownerId" | "createdAt" | "updatedAt">) {
  return {
    id: hub.id,
    hub_id: hub.id,
    created_by: hub.ownerId,
    kind: "system" as const,
    title: "Board",
    status: "active" as const,
    created_at: hub.createdAt.toISOString(),
    updated_at: hub.updatedAt.toISOString(),
  };
}

/** Memax's BoardSlot for a decision gate: the question, its options and, once settled, the answer. */
export function serializeGateSlot(gate: DecisionGate) {
  const options = gateOptions(gate);
  const chosen = gate.choice !== null ? options[gate.choice] : undefined;
  return {
    id: gate.id,
    board_id: gate.hubId,
    slot_key: gateSlotKey(gate.id),
    kind: "decision_gate",
    title: gate.question,
    payload: {
      question: gate.question,
      options,
      ...(gate.context && { context: gate.context }),
      ...(gate.sourceAgent && { source_agent: gate.sourceAgent }),
      requested_by: gate.requestedBy,
      ...(chosen && { chosen }),
    },
    cite_memory_ids: gate.memoryId ? [gate.memoryId] : [],
    state: gate.state,
    ...(gate.resolvedBy &&
      gate.resolvedAt &&
      gate.resolution && { resolution: { action: gate.resolution, resolved_by: gate.resolvedBy, resolved_at: gate.resolvedAt.toISOString() } }),
    created_at: gate.createdAt.toISOString(),
    updated_at: gate.updatedAt.toISOString(),
  };
}
