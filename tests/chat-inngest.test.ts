import { InngestTestEngine } from "@inngest/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatSweepFunction, chatTurnFunction } from "@/inngest/chat-functions.ts";
import { CHAT_TURN_EVENT } from "@/lib/chat/chat-turn-runner.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Agent chat's Inngest functions, run with Inngest's official test engine (the dev server cannot be
// installed here): a turn event runs the turn; the sweep resends turns whose event was lost.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  expect((await ann.post("/v1/memories", { content: "# Pager\nThe pager rotation hands over on Mondays at 09:00." })).status).toBe(201);
});
afterAll(async () => {
  await h?.close();
});

/** A turn queued as a send leaves it, but never handed to a worker (its event was lost). */
async function queuedTurn(updatedAt = new Date()) {
  const session = (await ann.post("/v1/chat/sessions", { scope_type: "user_all_hubs" })).body.data.id as string;
  const user = await h.db.chatMessage.create({ data: { id: newId(), sessionId: session, sequence: 1, role: "user", authorUserId: ann.id, status: "completed", content: "When does the pager hand over?" } });
  const turn = await h.db.chatMessage.create({
    data: { id: newId(), sessionId: session, sequence: 2, role: "assistant", authorUserId: ann.id, status: "queued", parentMessageId: user.id, credential: { type: "api_key", scopes: ["read", "write"], hub_ids: null } },
  });
  await h.db.chatSession.update({ where: { id: session }, data: { status: "running", activeMessageId: turn.id, messageCount: 2 } });
  await h.db.$executeRaw`UPDATE chat_messages SET updated_at = ${updatedAt} WHERE id = ${turn.id}::uuid`;
  return turn.id;
}

describe("chat on Inngest", () => {
  it("chat-turn runs the turn its event names", async () => {
    const id = await queuedTurn();
    const { result } = await new InngestTestEngine({ function: chatTurnFunction, events: [{ name: CHAT_TURN_EVENT, data: { message_id: id } }] }).execute();
    expect(result).toEqual({ status: "finished" });
    const turn = await h.db.chatMessage.findUniqueOrThrow({ where: { id } });
    expect(turn.status).toBe("completed");
    expect(turn.content).toMatch(/Mondays at 09:00/);
    // A repeated event finds nothing left to do.
    const again = await new InngestTestEngine({ function: chatTurnFunction, events: [{ name: CHAT_TURN_EVENT, data: { message_id: id } }] }).execute();
    expect(again.result).toEqual({ status: "skipped" });
  });

  it("chat-sweep resends a turn whose event was lost, and not one handed out a moment ago", async () => {
    const lost = await queuedTurn(new Date(Date.now() - 60_000));
    await queuedTurn(); // handed out a moment ago: not resent
    const { result, ctx } = await new InngestTestEngine({ function: chatSweepFunction, steps: [{ id: "resume", handler: () => ({ ids: ["evt-1"] }) }] }).execute();
    expect(result).toEqual({ resumed: 1 });
    expect(ctx.step.sendEvent).toHaveBeenCalledWith("resume", [{ name: CHAT_TURN_EVENT, data: { message_id: lost } }]);
  });
});
