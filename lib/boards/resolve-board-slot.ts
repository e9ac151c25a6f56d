import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { canEditMemory } from "@/lib/api/permissions.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { DecisionGate } from "@/lib/db/generated/client.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { lockMemoryRows } from "@/lib/db/row-lock.ts";
import { hubPermissionOrThrow, lockMembershipOrThrow, type Membership } from "@/lib/hubs/hub-access.ts";
import { createMemory } from "@/lib/memories/create-memory.ts";
import { DECISION_GATE_PATH_PREFIX, createMemoryBodySchema } from "@/lib/memories/memory-fields.ts";
import { assertStorageQuota } from "@/lib/quotas/assert-storage-quota.ts";
import { MAX_OPEN_GATES, type ResolveSlotBody } from "./decision-gate-fields.ts";
import { OPEN_GATE_STATES, closeGateNotifications, reopenGateNotifications } from "./gate-notifications.ts";
import { findCustomSlot, isCustomSlotKey } from "./find-custom-slot.ts";
import { findGateSlot } from "./find-gate-slot.ts";
import { resolveCustomSlot } from "./resolve-custom-slot.ts";
import { gateOptions, serializeGateSlot } from "./serialize-board.ts";

const isOpen = (gate: DecisionGate) => (OPEN_GATE_STATES as readonly string[]).includes(gate.state);

/** A choice found its gate settled (answered or dismissed) once it held the answer path's lock. */
const CLAIM_LOST = new Error("the gate's claim was lost before its answer was written");

/**
 * POST /v1/hubs/{id}/board/slots/{slot_key}/resolve: a decision gate (resolveDecisionGate), or a
 * custom board's card, which is acknowledged, dismissed or reopened.
 */
export async function resolveBoardSlot(ctx: AuthContext, hubId: string, slotKey: string, input: ResolveSlotBody) {
  if (!isCustomSlotKey(slotKey)) return resolveDecisionGate(ctx, hubId, slotKey, input);
  const membership = await hubPermissionOrThrow(ctx, hubId, "memories.write", "answer cards");
  return resolveCustomSlot(ctx, membership, await findCustomSlot(ctx.db, membership.hub.id, slotKey), input);
}

/**
 * Any member who may write answers a decision gate (`choose` with the option's id or text),
 * dismisses it, or reopens a settled one. A card someone already settled answers 200 with its
 * current state (Memax's idempotent resolve).
 */
export async function resolveDecisionGate(ctx: AuthContext, hubId: string, slotKey: string, input: ResolveSlotBody) {
  const membership = await hubPermissionOrThrow(ctx, hubId, "memories.write", "answer decisions");
  const gate = await findGateSlot(ctx.db, membership.hub.id, slotKey);
  switch (input.action) {
    case "choose":
      return { slot: serializeGateSlot(await choose(ctx, membership, gate, input.choice)) };
    case "dismiss":
      return { slot: serializeGateSlot(await dismiss(ctx, membership, gate)) };
    case "reopen":
      return { slot: serializeGateSlot(await reopen(ctx, membership, gate)) };
    default:
      throw new ApiError("invalid_request", `A decision is answered with "choose" (and a choice) or "dismiss", not "${input.action}"`, {
        issues: [{ path: "action", message: "choose, dismiss or reopen" }],
      });
  }
}

/** The option `choice` names: its id ("1"…) or its text (any case). */
function optionIndex(gate: DecisionGate, choice: string | undefined): number {
  const options = gateOptions(gate);
  const index = choice === undefined ? -1 : options.findIndex((o) => o.id === choice || o.label.toLowerCase() === choice.toLowerCase());
  if (index < 0) {
    throw new ApiError("invalid_request", choice === undefined ? "choose needs a choice: an option's id or text" : `"${choice}" is not one of the options`, {
      issues: [{ path: "choice", message: "not an option" }],
      options,
    });
  }
  return index;
}

async function reread(ctx: AuthContext, gate: DecisionGate): Promise<DecisionGate> {
  return (await ctx.db.decisionGate.findUnique({ where: { id: gate.id } })) ?? gate;
}

/**
 * Writes the answer as a memory of the hub, at one source_path per gate, so answering again after a
 * reopen updates that memory. The claim (one answer wins) is made in that memory's own transaction,
 * under the answer path's lock, with the bell's rows closed there too: all of it commits with the
 * memory or not at all. Until then the gate stays open, so it keeps its place under MAX_OPEN_GATES
 * (a question asked meanwhile is over the limit if the answer then cannot be written) and nothing can
 * reopen and answer it around this choice; a choice that comes second writes nothing.
 */
async function choose(ctx: AuthContext, membership: Membership, gate: DecisionGate, choice: string | undefined): Promise<DecisionGate> {
  const index = optionIndex(gate, choice);
  if (!isOpen(gate)) return reread(ctx, gate);
  const now = ctx.now();
  const body = createMemoryBodySchema.parse({
    title: `Decision: ${gate.question}`.slice(0, 200),
    content: await decisionText(ctx, gate, index, now),
    kind: "rationale",
    stability: "stable",
    tags: ["decision"],
    source: "decision",
    source_path: answerPath(gate),
  });
  let memoryId: string | null = null;
  try {
    await createMemory({ ...ctx, hub: membership.hub, role: membership.role }, body, {
      gateAnswer: true,
      underLock: async (tx) => {
        const claimed = await tx.decisionGate.updateMany({
          where: { id: gate.id, state: { in: [...OPEN_GATE_STATES] } },
          data: { state: "resolved", choice: index, resolution: "choose", resolvedBy: ctx.user.id, resolvedAt: now },
        });
        if (claimed.count === 0) throw CLAIM_LOST;
        // Its record as it stands now (an answer since this gate was read may have written it).
        const { memoryId: recordId } = await tx.decisionGate.findUniqueOrThrow({ where: { id: gate.id }, select: { memoryId: true } });
        await takeOverAnswerRecord(tx, ctx, membership, gate, recordId);
        await closeGateNotifications(tx, gate.id, `chose_${index + 1}`, now);
      },
      // The record with the answer, in its transaction (the gate's row is held since the claim): set
      // after the commit, a reopen and another answer in between found no record to take over (a
      // contributor's answer was then refused the path), and a gate deleted in between was a 500.
      inTransaction: async (tx, memory) => {
        memoryId = memory.id;
        await tx.decisionGate.update({ where: { id: gate.id }, data: { memoryId } });
      },
    });
  } catch (error) {
    // Someone else's answer came first: the card as it stands (Memax's idempotent resolve).
    if (error === CLAIM_LOST) return reread(ctx, gate);
    throw error;
  }
  // The card as it stands now; deleted since, it is answered as this choice left it.
  const answered = { ...gate, state: "resolved", choice: index, resolution: "choose", resolvedBy: ctx.user.id, resolvedAt: now, memoryId };
  return (await ctx.db.decisionGate.findUnique({ where: { id: gate.id } })) ?? answered;
}

const answerPath = (gate: DecisionGate) => `${DECISION_GATE_PATH_PREFIX}${gate.id}`;

/**
 * The memory an earlier answer of this gate wrote is the gate's record, not its first answerer's: any
 * member who may write answers a reopened gate. A chooser who could not edit it (a contributor, once
 * someone else answered) is made its owner first, in the answer's transaction, so the answer updates
 * it in place rather than being refused (and an answer that cannot be written leaves it as it was).
 * Only the gate's own record: another memory at its source_path is left to the rules of pushes.
 */
async function takeOverAnswerRecord(tx: DbClient, ctx: AuthContext, membership: Membership, gate: DecisionGate, recordId: string | null): Promise<void> {
  if (!recordId) return;
  await lockMemoryRows(tx, [recordId], [membership.hub.id]);
  const record = await tx.memory.findFirst({ where: { id: recordId, hubId: membership.hub.id, sourcePath: answerPath(gate) }, select: { ownerId: true, content: true } });
  if (!record || canEditMemory(membership.role, record.ownerId === ctx.user.id)) return;
  await tx.memory.update({ where: { id: recordId }, data: { ownerId: ctx.user.id } });
  // It now counts against the chooser's quota, as a memory they pushed would.
  await assertStorageQuota(tx, { ownerId: ctx.user.id, hubId: membership.hub.id, bytes: Buffer.byteLength(record.content, "utf8"), memories: 1 });
}

async function decisionText(ctx: AuthContext, gate: DecisionGate, index: number, now: Date): Promise<string> {
  const asker = await ctx.db.user.findUnique({ where: { id: gate.requestedBy }, select: { name: true } });
  const options = gateOptions(gate);
  const day = (date: Date) => date.toISOString().slice(0, 10);
  // "claude-code for Ann" when an agent asked for its person; the person alone when none was named.
  const who = gate.sourceAgent ? [gate.sourceAgent, asker?.name && `for ${asker.name}`].filter(Boolean).join(" ") : asker?.name || "an agent";
  return [
    `# Decision: ${gate.question}`,
    "",
    `Chosen: **${options[index]!.label}**`,
    "",
    "Options:",
    ...options.map((o, i) => `${o.id}. ${o.label}${i === index ? " (chosen)" : ""}`),
    ...(gate.context ? ["", `Context: ${gate.context}`] : []),
    "",
    `Asked by ${who} on ${day(gate.createdAt)}; answered by ${ctx.user.name} on ${day(now)}.`,
  ].join("\n");
}

async function dismiss(ctx: AuthContext, membership: Membership, gate: DecisionGate): Promise<DecisionGate> {
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    // Still a member who may write, now (a choice is checked so by the memory it writes).
    await lockMembershipOrThrow(tx, ctx, membership.hub, "memories.write", "answer decisions");
    const claimed = await tx.decisionGate.updateMany({
      where: { id: gate.id, state: { in: [...OPEN_GATE_STATES] } },
      data: { state: "dismissed", choice: null, resolution: "dismiss", resolvedBy: ctx.user.id, resolvedAt: now },
    });
    if (claimed.count === 1) await closeGateNotifications(tx, gate.id, "dismissed", now);
    return (await tx.decisionGate.findUnique({ where: { id: gate.id } })) ?? gate;
  });
}

/**
 * Back on the board (and pending in the bell); the memory of an earlier answer stays, and a new answer
 * updates it. A reopened gate is open again, so it counts against MAX_OPEN_GATES as a new one does
 * (under the same lock): a hub with its open gates full answers 409 gate_limit.
 */
async function reopen(ctx: AuthContext, membership: Membership, gate: DecisionGate): Promise<DecisionGate> {
  return ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, `decision-gates:${gate.hubId}`);
    await lockMembershipOrThrow(tx, ctx, membership.hub, "memories.write", "answer decisions");
    const current = await tx.decisionGate.findUnique({ where: { id: gate.id } });
    if (current && !isOpen(current)) {
      const open = await tx.decisionGate.count({ where: { hubId: gate.hubId, state: { in: [...OPEN_GATE_STATES] } } });
      if (open >= MAX_OPEN_GATES) {
        throw new ApiError("gate_limit", `This hub's board already has ${open} open decisions (the limit is ${MAX_OPEN_GATES}): answer or dismiss one before reopening another`, {
          limit: MAX_OPEN_GATES,
        });
      }
    }
    const reopened = await tx.decisionGate.updateMany({
      where: { id: gate.id, state: { in: ["resolved", "dismissed"] } },
      data: { state: "seen", choice: null, resolution: null, resolvedBy: null, resolvedAt: null },
    });
    if (reopened.count === 1) await reopenGateNotifications(tx, gate.id);
    return (await tx.decisionGate.findUnique({ where: { id: gate.id } })) ?? gate;
  });
}
