import type { DbClient } from "@/lib/db/database.ts";
import type { DecisionGate } from "@/lib/db/generated/client.ts";
import { gateOptions, gateSlotKey } from "./serialize-board.ts";

/** A gate waiting for its answer; resolved and dismissed ones are settled. */
export const OPEN_GATE_STATES = ["fresh", "seen"] as const;

/** What the person's notification shows: enough to answer from the bell without opening the board. */
export function gateNotificationPayload(gate: DecisionGate, hub: { id: string; name: string }) {
  return {
    hub: { id: hub.id, name: hub.name },
    gate: {
      id: gate.id,
      slot_key: gateSlotKey(gate.id),
      question: gate.question,
      options: gateOptions(gate),
      ...(gate.context && { context: gate.context }),
      ...(gate.sourceAgent && { source_agent: gate.sourceAgent }),
    },
  };
}

/** The gate was answered or dismissed (on the board, in the bell, or by the API): its pending rows close. */
export async function closeGateNotifications(tx: DbClient, gateId: string, resolution: string, now: Date) {
  await tx.notification.updateMany({
    where: { kind: "decision_gate", sourceId: gateId, status: "pending" },
    data: { status: "resolved", resolution, resolvedAt: now },
  });
}

/** The gate was reopened: the rows its answer closed are pending again (as an undone review's are). */
export async function reopenGateNotifications(tx: DbClient, gateId: string) {
  await tx.notification.updateMany({
    where: { kind: "decision_gate", sourceId: gateId, status: "resolved" },
    data: { status: "pending", resolution: null, resolvedAt: null },
  });
}
