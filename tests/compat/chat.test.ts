import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSdk, pushProcessed, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

/**
 * Memax's SDK chats resource, unchanged, against the built server over real HTTP: the turn runs in
 * the server's own background runner and its SSE stream goes through Next's response streaming.
 * Then a turn waiting on an approval survives a restart: its state is in the database.
 */
describe("Memax SDK: agent chat on the built server", () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "engram-compat-chat-"));
  let engram: Engram;
  let ann: EngramUser;
  let Memax: new (config: Record<string, unknown>) => any;

  /** The SDK's stream of one answer until `until` (default: its terminal event). */
  function events(sdk: any, sessionId: string, messageId: string, until = (e: string) => /^message\.(completed|partial_failed|failed|canceled)$/.test(e)) {
    return new Promise<{ event: string; data: any }[]>((resolve, reject) => {
      const seen: { event: string; data: any }[] = [];
      const timer = setTimeout(() => reject(new Error(`stream timed out: ${JSON.stringify(seen)}`)), 60_000);
      const controller = sdk.chats.streamMessage(sessionId, messageId, {
        onEvent: (event: string, data: any) => {
          seen.push({ event, data });
          if (until(event)) {
            clearTimeout(timer);
            controller.abort();
            resolve(seen);
          }
        },
      });
    });
  }

  beforeAll(async () => {
    engram = await startEngram({}, { dataDir });
    ann = await engram.user("Ann");
    ({ Memax } = await loadSdk());
    await pushProcessed(ann, ["# Backups\n\nThe orion database is backed up every night at 02:00 UTC to the cold storage bucket."]);
  });
  afterAll(async () => {
    await engram?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("answers, streams and replays a turn through the SDK", async () => {
    const sdk = new Memax({ apiUrl: engram.url, apiKey: ann.key });
    const session = await sdk.chats.createSession({ scopeType: "user_all_hubs" });
    const sent = await sdk.chats.sendMessage(session.id, { content: "When is the orion database backed up?", idempotencyKey: "c-1" });
    const stream = await events(sdk, session.id, sent.active_message_id);
    expect(stream.map((e) => e.event)).toContain("message.text");
    const done = stream.at(-1)!;
    expect(done.event).toBe("message.completed");
    expect(done.data.message.content).toMatch(/02:00 UTC.*\[1\]/);
    expect((await sdk.chats.getMessage(session.id, sent.active_message_id)).citations[0]).toMatchObject({ title: "Backups" });
  });

  it("keeps a turn waiting on an approval across a restart, and finishes it after", async () => {
    let sdk = new Memax({ apiUrl: engram.url, apiKey: ann.key });
    const session = await sdk.chats.createSession({ scopeType: "user_all_hubs" });
    const sent = await sdk.chats.sendMessage(session.id, { content: "Remember that orion restores take twenty minutes.", idempotencyKey: "c-2" });
    const before = await events(sdk, session.id, sent.active_message_id, (e) => e === "approval.required");
    const approvalId = before.at(-1)!.data.approval_id;
    const adminToken = engram.adminToken;
    expect((await engram.stop()).code).toBe(0);
    engram = await startEngram({}, { dataDir, adminToken });
    sdk = new Memax({ apiUrl: engram.url, apiKey: ann.key });
    expect((await sdk.chats.getSession(session.id)).status).toBe("awaiting_approval");
    expect(await sdk.chats.decideApproval(session.id, approvalId, "approve")).toMatchObject({ status: "approved" });
    const after = await events(sdk, session.id, sent.active_message_id);
    // The replay starts from the beginning: the events before the restart are there too.
    expect(after.map((e) => e.event)).toEqual(["message.tool_call", "approval.required", "approval.decided", "message.tool_result", "message.text", "message.completed"]);
    expect(after.at(-1)!.data.message.content).toMatch(/^Saved to “Personal”/);
  });
});
