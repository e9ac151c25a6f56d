import { randomUUID } from "node:crypto";
import { CHAT_TURN_EVENT, sweepChatTurns } from "@/lib/chat/chat-turn-runner.ts";
import { runChatTurn } from "@/lib/chat/run-chat-turn.ts";
import { getDatabase } from "@/lib/db/database.ts";
import { inngest } from "./client.ts";

/** One chat turn (or its resumption after an approval or a cancel); the turn's lease makes a repeat harmless. */
export const chatTurnFunction = inngest.createFunction(
  { id: "chat-turn", name: "Chat turn", triggers: [{ event: CHAT_TURN_EVENT }], retries: 2 },
  async ({ event, step }) => {
    const messageId = (event.data as { message_id?: string }).message_id;
    if (typeof messageId !== "string") return { status: "invalid" as const };
    // One owner per attempt: a retry or duplicate of this event while an earlier attempt still runs
    // must not share its lease (both would write the answer).
    const status = await step.run("turn", async () => runChatTurn(await getDatabase(), messageId, `inngest-${event.id ?? messageId}-${randomUUID()}`));
    return { status };
  },
);

/** Every minute: times out unanswered approvals and resends turns whose event or worker was lost. */
export const chatSweepFunction = inngest.createFunction(
  { id: "chat-sweep", name: "Sweep chat turns", triggers: [{ cron: "* * * * *" }] },
  async ({ step }) => {
    const ids = await step.run("sweep", async () => sweepChatTurns(await getDatabase()));
    if (ids.length) await step.sendEvent("resume", ids.map((id) => ({ name: CHAT_TURN_EVENT, data: { message_id: id } })));
    return { resumed: ids.length };
  },
);
