import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { hubPermissionOrThrow, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { newId } from "@/lib/ids.ts";
import { createNotification } from "@/lib/notifications/create-notification.ts";
import { MAX_OPEN_GATES, type RequestDecisionBody } from "./decision-gate-fields.ts";
import { OPEN_GATE_STATES, gateNotificationPayload } from "./gate-notifications.ts";
import { serializeGateSlot } from "./serialize-board.ts";

/**
 * POST /v1/hubs/{id}/board/decision-gate: an agent asks its person to choose. The question becomes
 * a card on the hub's board and a pending decision in the person's notifications. The answer is
 * written to a memory the agent can recall (resolve-board-slot.ts). At most MAX_OPEN_GATES are open
 * per hub, counted under the hub's gate lock so concurrent requests cannot pass it.
 */
export async function requestDecision(ctx: AuthContext, hubId: string, input: RequestDecisionBody) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "memories.write", "ask for decisions");
  const now = ctx.now();
  const gate = await ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, `decision-gates:${hub.id}`);
    // Still a member who may write, now: a demotion or removal since the check above asks nothing.
    await lockMembershipOrThrow(tx, ctx, hub, "memories.write", "ask for decisions");
    const open = await tx.decisionGate.count({ where: { hubId: hub.id, state: { in: [...OPEN_GATE_STATES] } } });
    if (open >= MAX_OPEN_GATES) {
      throw new ApiError("gate_limit", `This hub's board already has ${open} open decisions (the limit is ${MAX_OPEN_GATES}): wait for an answer, or dismiss one`, {
        limit: MAX_OPEN_GATES,
      });
    }
    const created = await tx.decisionGate.create({
      data: {
        id: newId(now.getTime()),
        hubId: hub.id,
        requestedBy: ctx.user.id,
        // A key issued for an agent asks as that agent, whatever the body claims (as pushes do).
        sourceAgent: ctx.credential.agentName ?? (input.source_agent || null),
        question: input.question,
        options: input.options,
        context: input.context || null,
        createdAt: now,
        updatedAt: now,
      },
    });
    await createNotification(tx, {
      userId: ctx.user.id,
      hubId: hub.id,
      kind: "decision_gate",
      sourceKind: "decision_gate",
      sourceId: created.id,
      priority: 1,
      payload: gateNotificationPayload(created, hub),
      actorId: ctx.user.id,
      now,
    });
    return created;
  });
  return { slot: serializeGateSlot(gate) };
}
