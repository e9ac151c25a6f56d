import { createHash } from "node:crypto";
import { cpSync, mkdtempSync, appendFileSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Database } from "@/lib/db/database.ts";
import { openDatabase } from "@/lib/db/database.ts";
import { listMigrations, migrate } from "@/lib/db/migrate.ts";
import { newId } from "@/lib/ids.ts";
import { DELETED_REASON } from "@/lib/memories/drop-memory-copies.ts";
import { openTestDatabase } from "./support/harness.ts";

let database: Database;
beforeAll(async () => {
  database = await openTestDatabase();
});
afterAll(() => database.close());

describe("schema and migrations agree", () => {
  test("every model round-trips through the generated client", async () => {
    const db = database.prisma;
    const now = new Date("2026-02-03T04:05:06.789Z");
    const user = await db.user.create({ data: { id: newId(), email: "rt@example.test", name: "RT", passwordHash: "h", image: "i", dataDeletionRequestedAt: now, dataDeletionAttempts: 2, dataDeletionHeartbeatAt: now, createdAt: now, updatedAt: now } });
    const hub = await db.hub.create({
      data: { id: newId(), name: "H", slug: "rt-hub", hubType: "team", ownerId: user.id, allowContributorTopics: true, allowContributorDreams: true, contributorDeletePolicy: "any", deletedAt: now, purgeFailedAt: now, createdAt: now, updatedAt: now },
    });
    const rows = {
      oauthAccount: await db.oAuthAccount.create({ data: { id: newId(), userId: user.id, provider: "github", providerAccountId: "42", createdAt: now } }),
      apiKey: await db.apiKey.create({ data: { id: newId(), userId: user.id, name: "k", prefix: "egk_ab", keyHash: "f".repeat(64), createdAt: now, expiresAt: now, lastUsedAt: now, revokedAt: now } }),
      hubMember: await db.hubMember.create({ data: { hubId: hub.id, userId: user.id, role: "owner", joinedAt: now, lastVisitedAt: now } }),
      topic: await db.topic.create({ data: { id: newId(), hubId: hub.id, name: "T", createdBy: user.id, createdAt: now, updatedAt: now, deletingAt: now, deletingClaim: newId() } }),
    };
    const memory = await db.memory.create({
      data: {
        id: newId(), hubId: hub.id, ownerId: user.id, topicId: rows.topic.id, title: "t", titleDerived: true, content: "c", contentType: "markdown",
        contentHash: "a".repeat(64), summary: "s", tags: ["x", "y"], kind: "semantic", kindLocked: true, stability: "stable", stabilityLocked: true,
        boundary: "private", state: "active", source: "cli", sourceAgent: "a", assistedByAgent: "b", initiationType: "import", sourcePath: "p.md",
        hint: "h", hubReason: "r", projectContext: { repo: "x" }, fileRef: { object_key: "k" }, attachmentBytes: 7n, version: 3, accessCount: 4, lastAccessedAt: now,
        processingStatus: "done", processingAttempts: 1, processingError: "e", processingStartedAt: now, processingQueuedAt: now, processedAt: now, createdAt: now, updatedAt: now, contentChangedAt: now,
        linkUrl: "https://links.example/page",
      },
    });
    const more = {
      chunk: await db.chunk.create({ data: { id: newId(), memoryId: memory.id, hubId: hub.id, position: 0, content: "c", headingChain: "A > B", tokenCount: 3, embeddingModel: "local:round-trip", createdAt: now } }),
      invite: await db.invite.create({
        data: { id: newId(), hubId: hub.id, role: "viewer", email: "e@x.test", tokenHash: "t".repeat(64), tokenEncrypted: "enc", createdBy: user.id, createdAt: now, expiresAt: now },
      }),
      termStat: await db.recallTermStat.create({ data: { hubId: hub.id, term: "round-trip-term", df: 7 } }),
      hubStat: await db.recallHubStat.upsert({
        where: { hubId: hub.id },
        create: { hubId: hub.id, chunkCount: 5, totalLength: 123n },
        update: { chunkCount: 5, totalLength: 123n },
      }),
      transfer: await db.ownershipTransfer.create({ data: { id: newId(), hubId: hub.id, fromUserId: user.id, targetUserId: user.id, createdAt: now, expiresAt: now } }),
      attachment: await db.attachment.create({ data: { id: newId(), memoryId: memory.id, hubId: hub.id, objectKey: "o/k", filename: "f.txt", contentType: "text/plain", sizeBytes: 5, sha256: "s", createdAt: now } }),
      mail: await db.mailOutbox.create({ data: { id: newId(), toAddress: "a@b.test", subject: "s", body: "b", kind: "invite", hubId: hub.id, senderId: user.id, createdAt: now } }),
      event: await db.event.create({ data: { id: newId(), type: "memory.created", hubId: hub.id, actorId: user.id, entityId: memory.id, createdAt: now } }),
      setting: await db.setting.create({ data: { key: "rt", value: "v", createdAt: now } }),
      oauthClient: await db.oAuthClient.create({ data: { id: "https://client.example/meta.json", name: "C", redirectUris: ["http://127.0.0.1/cb"], kind: "metadata_document", clientUri: "https://client.example", createdAt: now, fetchedAt: now, createdFrom: "2001:db8:1:2::/64" } }),
      notification: await db.notification.create({
        data: { id: newId(), userId: user.id, hubId: hub.id, kind: "hub_invite", status: "resolved", resolution: "accepted", priority: 2, sourceKind: "invite", sourceId: "s", payload: { a: 1 }, createdAt: now, seenAt: now, resolvedAt: now, expiresAt: now },
      }),
      userSetting: await db.userSetting.create({
        data: {
          userId: user.id, theme: "dark", locale: "zh", notificationsEnabled: false, updatedAt: now,
          dreamsExcludedKinds: ["procedural"], dreamsSimilarityThreshold: 0.85, dreamsStalenessDays: 30, hubHeaderAuroraMode: "time",
          pulseHiddenHubIds: [hub.id], devFlags: { mockDreams: true },
        },
      }),
      usageCounter: await db.usageCounter.create({ data: { userId: user.id, periodStart: now, pushes: 1, recalls: 2, asks: 3 } }),
      storageUsage: await db.storageUsage.create({ data: { scope: "user", scopeId: newId(), bytes: 5_000_000_000n, memories: 3 } }),
      hubOwnerUsage: await db.hubOwnerUsage.create({ data: { hubId: newId(), ownerId: newId(), bytes: 5_000_000_000n, memories: 3 } }),
      upload: await db.upload.create({
        data: { id: newId(), ownerId: user.id, objectKey: "uploads/u/1", filename: "f.pdf", contentType: "application/pdf", sizeBytes: 9, purpose: "memory_attachment", createdAt: now, expiresAt: now, attachedAt: now, sha256: "ab".repeat(32) },
      }),
    };
    const grant = await db.oAuthGrant.create({
      data: { id: newId(), userId: user.id, clientId: more.oauthClient.id, hubIds: [hub.id], allHubs: false, scope: "read write", resource: "http://x/mcp", createdAt: now, lastUsedAt: now, revokedAt: now, revokedReason: "r", consentTokenHash: "t".repeat(64) },
    });
    const code = await db.oAuthCode.create({ data: { codeHash: "c".repeat(64), grantId: grant.id, redirectUri: "http://127.0.0.1/cb", codeChallenge: "x", resource: "http://x/mcp", expiresAt: now, usedAt: now } });
    const refresh = await db.oAuthRefreshToken.create({ data: { tokenHash: "r".repeat(64), grantId: grant.id, createdAt: now, expiresAt: now, usedAt: now } });
    expect(await db.oAuthClient.findUnique({ where: { id: more.oauthClient.id } })).toEqual(more.oauthClient);
    expect(await db.oAuthGrant.findUnique({ where: { id: grant.id } })).toEqual(grant);
    expect(await db.oAuthCode.findUnique({ where: { codeHash: code.codeHash } })).toEqual(code);
    expect(await db.oAuthRefreshToken.findUnique({ where: { tokenHash: refresh.tokenHash } })).toEqual(refresh);
    const denied = await db.oAuthDeniedConsent.create({ data: { consentTokenHash: "d".repeat(64), userId: user.id, expiresAt: now } });
    expect(await db.oAuthDeniedConsent.findUnique({ where: { consentTokenHash: denied.consentTokenHash } })).toEqual(denied);
    expect(await db.user.findUnique({ where: { id: user.id } })).toEqual(user);
    expect(await db.hub.findUnique({ where: { id: hub.id } })).toEqual(hub);
    // The attachment's bytes joined its memory's (the attachments trigger): 7 + 5.
    expect(await db.memory.findUnique({ where: { id: memory.id } })).toEqual({ ...memory, attachmentBytes: 12n });
    expect(await db.oAuthAccount.findUnique({ where: { id: rows.oauthAccount.id } })).toEqual(rows.oauthAccount);
    expect(await db.apiKey.findUnique({ where: { id: rows.apiKey.id } })).toEqual(rows.apiKey);
    expect(await db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId: user.id } } })).toEqual(rows.hubMember);
    expect(await db.topic.findUnique({ where: { id: rows.topic.id } })).toEqual(rows.topic);
    expect(await db.chunk.findUnique({ where: { id: more.chunk.id } })).toEqual(more.chunk);
    expect(await db.invite.findUnique({ where: { id: more.invite.id } })).toEqual(more.invite);
    expect(await db.ownershipTransfer.findUnique({ where: { id: more.transfer.id } })).toEqual(more.transfer);
    expect(await db.attachment.findUnique({ where: { id: more.attachment.id } })).toEqual(more.attachment);
    expect(await db.mailOutbox.findUnique({ where: { id: more.mail.id } })).toEqual(more.mail);
    expect(await db.event.findUnique({ where: { id: more.event.id } })).toEqual(more.event);
    expect(await db.setting.findUnique({ where: { key: "rt" } })).toEqual(more.setting);
    expect(await db.notification.findUnique({ where: { id: more.notification.id } })).toEqual(more.notification);
    expect(await db.userSetting.findUnique({ where: { userId: user.id } })).toEqual(more.userSetting);
    expect(await db.usageCounter.findUnique({ where: { userId_periodStart: { userId: user.id, periodStart: now } } })).toEqual(more.usageCounter);
    expect(await db.storageUsage.findUnique({ where: { scope_scopeId: { scope: "user", scopeId: more.storageUsage.scopeId } } })).toEqual(more.storageUsage);
    expect(await db.hubOwnerUsage.findUnique({ where: { hubId_ownerId: { hubId: more.hubOwnerUsage.hubId, ownerId: more.hubOwnerUsage.ownerId } } })).toEqual(more.hubOwnerUsage);
    expect(await db.upload.findUnique({ where: { id: more.upload.id } })).toEqual(more.upload);
    expect(await db.recallTermStat.findUnique({ where: { hubId_term: { hubId: hub.id, term: "round-trip-term" } } })).toEqual(more.termStat);
    expect(await db.recallHubStat.findUnique({ where: { hubId: hub.id } })).toEqual(more.hubStat);
    const topicVisit = await db.topicVisit.create({ data: { topicId: rows.topic.id, userId: user.id, visitedAt: now } });
    expect(await db.topicVisit.findUnique({ where: { topicId_userId: { topicId: rows.topic.id, userId: user.id } } })).toEqual(topicVisit);
    // Shared rate-limit counters (issue 16, several processes on PostgreSQL).
    const window = await db.rateLimitWindow.create({ data: { key: "regular:user:x", windowStart: 1_700_000_040_000n, count: 3, allowed: false } });
    expect(await db.rateLimitWindow.findUnique({ where: { key_windowStart: { key: window.key, windowStart: window.windowStart } } })).toEqual(window);
    const ended = await db.endedSession.create({ data: { jti: "7f0e1c2a-0000-4000-8000-000000000001", expiresAt: new Date("2026-12-27T00:00:00.000Z") } });
    expect(await db.endedSession.findUnique({ where: { jti: ended.jti } })).toEqual(ended);
    const throttle = await db.signInThrottle.create({ data: { key: "acct:x@example.test", failures: 6, untilMs: 1_700_000_030_000n, expiresMs: 1_700_086_400_000n } });
    expect(await db.signInThrottle.findUnique({ where: { key: throttle.key } })).toEqual(throttle);
    // Agent configs and sessions (issue 15).
    const config = await db.agentConfig.create({
      data: { id: newId(), ownerId: user.id, agent: "claude-code", filePath: "CLAUDE.md", scope: "global", content: "c", contentHash: "h", sizeBytes: 1, version: 2, deletedAt: now, contentExpiresAt: now, createdAt: now, updatedAt: now },
    });
    const configVersion = await db.agentConfigVersion.create({ data: { id: newId(), configId: config.id, version: 2, content: "c", contentHash: "h", deviceId: "d", createdAt: now } });
    const configDevice = await db.agentConfigDevice.create({ data: { configId: config.id, deviceId: "d", syncedVersion: 2, syncedHash: "h", deleted: true, removed: true, localPath: "/p", updatedAt: now } });
    const session = await db.agentSession.create({
      data: { id: newId(), ownerId: user.id, agent: "codex", sessionId: "s1", title: "t", projectPath: "/p", deviceId: "d", contentType: "application/jsonl", contentHash: "h", sizeBytes: 1, storeKey: "k", createdAt: now, updatedAt: now },
    });
    const blob = await db.agentSessionBlob.create({ data: { key: "k", content: "c", createdAt: now } });
    expect(await db.agentConfig.findUnique({ where: { id: config.id } })).toEqual(config);
    expect(await db.agentConfigVersion.findUnique({ where: { id: configVersion.id } })).toEqual(configVersion);
    expect(await db.agentConfigDevice.findUnique({ where: { configId_deviceId: { configId: config.id, deviceId: "d" } } })).toEqual(configDevice);
    expect(await db.agentSession.findUnique({ where: { id: session.id } })).toEqual(session);
    expect(await db.agentSessionBlob.findUnique({ where: { key: "k" } })).toEqual(blob);
    // Dreams (issue 15).
    const dreamRun = await db.dreamRun.create({
      data: { id: newId(), hubId: hub.id, triggeredBy: user.id, mode: "maintenance", status: "completed", phase: "done", progress: { a: 1 }, memoriesScanned: 3, phaseMetrics: { similar: { candidates: 2 } }, modelCalls: 2, report: "r", error: "e", attempts: 1, leaseOwner: "w", attemptToken: "t", attemptStep: 2, attemptNumber: 1, heartbeatAt: now, startedAt: now, finishedAt: now, createdAt: now },
    });
    const dreamAction = await db.dreamAction.create({
      data: { id: newId(), runId: dreamRun.id, hubId: hub.id, actionType: "merge", state: "applied", sourceMemoryIds: [memory.id, memory.id], resultMemoryId: memory.id, fromTopicId: rows.topic.id, toTopicId: rows.topic.id, createdTopic: true, reason: "r", similarity: 0.5, details: { k: "v" }, resolution: "undone", resolvedBy: user.id, resolvedAt: now, createdAt: now },
    });
    await db.memory.update({ where: { id: memory.id }, data: { supersededBy: memory.id } });
    expect((await db.memory.findUniqueOrThrow({ where: { id: memory.id } })).supersededBy).toBe(memory.id);
    expect(await db.dreamRun.findUnique({ where: { id: dreamRun.id } })).toEqual(dreamRun);
    expect(await db.dreamAction.findUnique({ where: { id: dreamAction.id } })).toEqual(dreamAction);
    // Decision gates (lib/boards).
    const gate = await db.decisionGate.create({
      data: { id: newId(), hubId: hub.id, requestedBy: user.id, sourceAgent: "a", question: "q", options: ["x", "y"], context: "c", state: "resolved", choice: 1, resolution: "choose", resolvedBy: user.id, resolvedAt: now, memoryId: memory.id, createdAt: now, updatedAt: now },
    });
    expect(await db.decisionGate.findUnique({ where: { id: gate.id } })).toEqual(gate);
    // Connected agents (lib/agents).
    const agent = await db.connectedAgent.create({ data: { id: newId(), ownerId: user.id, agentName: "claude-code", displayName: "Claude", icon: "🤖", createdAt: now, updatedAt: now } });
    expect(await db.connectedAgent.findUnique({ where: { id: agent.id } })).toEqual(agent);
    // E-mail sign-in codes (lib/auth).
    const signInCode = await db.emailSignInCode.create({ data: { id: newId(), email: "a@example.test", codeHash: "h", redirectUri: "http://127.0.0.1:1/cb", attempts: 2, expiresAt: now, consumedAt: now, sentAt: now, clientAddress: "203.0.113.1", createdAt: now } });
    expect(await db.emailSignInCode.findUnique({ where: { id: signInCode.id } })).toEqual(signInCode);
    // Agent chat (lib/chat): a session, one turn, its stream log and an approval.
    const chat = await db.chatSession.create({
      data: { id: newId(), ownerId: user.id, scopeType: "hub_subset", scopeHubIds: [hub.id], writeHubId: hub.id, title: "t", model: "local", tools: ["recall"], status: "running", personaId: "none", pinnedMemoryIds: [], lockedAt: now, messageCount: 2, pinnedAt: now, archivedAt: now, lastMessageAt: now, activityAt: now, createdAt: now, updatedAt: now, deletedAt: now },
    });
    expect(await db.chatSession.findUnique({ where: { id: chat.id } })).toEqual(chat);
    const chatMessage = await db.chatMessage.create({
      data: { id: newId(), sessionId: chat.id, sequence: 2, role: "assistant", authorUserId: user.id, status: "running", scopeHubIdsUsed: [hub.id], content: "c", toolCalls: [{ id: "call" }], citations: [], usage: { model: "local" }, error: { code: "x" }, idempotencyKey: "k", parentMessageId: chat.id, credential: { scopes: ["read"] }, eventSeq: 1, leaseOwner: "w", heartbeatAt: now, startedAt: now, finishedAt: now, createdAt: now, updatedAt: now },
    });
    expect(await db.chatMessage.findUnique({ where: { id: chatMessage.id } })).toEqual(chatMessage);
    const chatEvent = await db.chatEvent.create({ data: { messageId: chatMessage.id, seq: 1, type: "message.text", data: { text: "c" }, createdAt: now } });
    expect(await db.chatEvent.findUnique({ where: { messageId_seq: { messageId: chatMessage.id, seq: 1 } } })).toEqual(chatEvent);
    const chatApproval = await db.chatApproval.create({
      data: { id: newId(), sessionId: chat.id, messageId: chatMessage.id, toolCallId: "call", toolName: "push_memory", arguments: { content: "c" }, status: "approved", credential: { scopes: ["write"] }, expiresAt: now, decidedAt: now, createdAt: now },
    });
    expect(await db.chatApproval.findUnique({ where: { id: chatApproval.id } })).toEqual(chatApproval);
    // Custom boards (lib/boards) and their card's versions.
    const customBoard = await db.customBoard.create({
      data: { id: newId(), hubId: hub.id, createdBy: user.id, title: "t", instruction: "i", status: "active", cardPayload: { answer: "a" }, cardCiteMemoryIds: [hub.id], cardState: "fresh", cardResolution: { action: "ack" }, cardDreamRunId: hub.id, cardContentUpdatedAt: now, cardCreatedAt: now, createdAt: now, updatedAt: now },
    });
    expect(await db.customBoard.findUnique({ where: { id: customBoard.id } })).toEqual(customBoard);
    const cardVersion = await db.customBoardCardVersion.create({ data: { id: newId(), boardId: customBoard.id, payload: { answer: "b" }, citeMemoryIds: [hub.id], dreamRunId: hub.id, contentProducedAt: now, createdAt: now } });
    expect(await db.customBoardCardVersion.findUnique({ where: { id: cardVersion.id } })).toEqual(cardVersion);
    const feedback = await db.customBoardFeedback.create({ data: { boardId: customBoard.id, contentProducedAt: now, userId: user.id, verdict: "accurate", createdAt: now, updatedAt: now } });
    expect(await db.customBoardFeedback.findUnique({ where: { boardId_contentProducedAt_userId: { boardId: customBoard.id, contentProducedAt: now, userId: user.id } } })).toEqual(feedback);
    // A verdict is accurate or inaccurate, whoever writes it.
    await expect(db.customBoardFeedback.update({ where: { boardId_contentProducedAt_userId: { boardId: customBoard.id, contentProducedAt: now, userId: user.id } }, data: { verdict: "meh" } })).rejects.toThrow();
    // Every model was exercised: a new model without a round-trip here fails this test.
    const models = Object.keys(db).filter((k) => !k.startsWith("$") && !k.startsWith("_") && typeof (db as unknown as Record<string, { findMany?: unknown }>)[k]?.findMany === "function");
    expect(models.sort()).toEqual(
      ["apiKey", "attachment", "chunk", "event", "hub", "hubMember", "invite", "mailOutbox", "memory", "oAuthAccount", "oAuthClient", "oAuthGrant", "oAuthCode", "oAuthRefreshToken", "oAuthDeniedConsent", "ownershipTransfer", "recallHubStat", "recallTermStat", "setting", "storageUsage", "hubOwnerUsage", "topic", "topicVisit", "user",
        "agentConfig", "agentConfigVersion", "agentConfigDevice", "agentSession", "agentSessionBlob", "dreamRun", "dreamAction", "upload", "notification", "userSetting", "usageCounter", "rateLimitWindow", "signInThrottle", "endedSession", "decisionGate", "connectedAgent", "emailSignInCode", "chatSession", "chatMessage", "chatEvent", "chatApproval", "customBoard", "customBoardCardVersion", "customBoardFeedback"].sort(),
    );
    // Deleting the hub cascades to everything that lives in it.
    await db.hub.delete({ where: { id: hub.id } });
    expect(await db.memory.count({ where: { hubId: hub.id } })).toBe(0);
    expect(await db.chunk.count({ where: { hubId: hub.id } })).toBe(0);
    expect(await db.decisionGate.count({ where: { hubId: hub.id } })).toBe(0);
    expect(await db.customBoard.count({ where: { hubId: hub.id } })).toBe(0);
    expect(await db.customBoardFeedback.count({ where: { boardId: customBoard.id } })).toBe(0);
    // Its storage counters too, after the cascade's memories shifted them.
    expect(await db.storageUsage.findMany({ where: { scopeId: hub.id } })).toEqual([]);
    expect(await db.hubOwnerUsage.count({ where: { hubId: hub.id } })).toBe(0);
  });

  test("the migration scrubbing deleted memories from chats scrubs the turns stored before it, and its index is used", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "engram-migrations-"));
    const db = await openDatabase({ dataDir: "memory://", migrate: false });
    try {
      const all = path.join(process.cwd(), "prisma", "migrations");
      const target = "20261130190000_chat_deleted_memory_titles";
      for (const m of listMigrations(all)) if (m.name < target) cpSync(path.join(all, m.name), path.join(dir, m.name), { recursive: true });
      await migrate(db.sql, dir);
      const [user, hub, kept, gone, session, message] = [newId(), newId(), newId(), newId(), newId(), newId()];
      const calls = JSON.stringify([{ id: "c1", name: "recall", result: { memories: [{ id: kept, title: "Kept title" }, { id: gone, title: "Gone title" }], sources: [{ id: gone, content: "Gone text" }] } }]);
      const cites = JSON.stringify([{ index: 1, memory_id: gone, title: "Gone title" }]);
      await db.sql.exec(`
        INSERT INTO users (id, email, name, created_at, updated_at) VALUES ('${user}', 'c@example.test', 'C', now(), now());
        INSERT INTO hubs (id, name, slug, hub_type, owner_id, created_at, updated_at) VALUES ('${hub}', 'H', 'chat-hub', 'team', '${user}', now(), now());
        INSERT INTO memories (id, hub_id, owner_id, title, content, content_type, content_hash, kind, stability, state, source, created_at, updated_at)
        VALUES ('${kept}', '${hub}', '${user}', 'Kept title', 'k', 'markdown', 'h1', 'semantic', 'stable', 'active', 'cli', now(), now());
        INSERT INTO chat_sessions (id, owner_id, scope_type, model, activity_at, created_at, updated_at) VALUES ('${session}', '${user}', 'user_all_hubs', 'local', now(), now(), now());
        INSERT INTO chat_messages (id, session_id, sequence, role, author_user_id, status, tool_calls, citations, created_at, updated_at)
        VALUES ('${message}', '${session}', 1, 'assistant', '${user}', 'completed', '${calls}', '${cites}', now(), now());
        INSERT INTO chat_events (message_id, seq, type, data) VALUES ('${message}', 1, 'message.completed', '{"message": {"tool_calls": ${calls}, "citations": ${cites}}}');`);
      cpSync(path.join(all, target), path.join(dir, target), { recursive: true });
      expect((await migrate(db.sql, dir)).map((m) => m.name)).toEqual([target]);
      const row = (await db.sql.query<{ doc: string }>(`SELECT json_build_array(tool_calls, citations)::text AS doc FROM chat_messages WHERE id = '${message}'`))[0]!.doc;
      const event = (await db.sql.query<{ doc: string }>(`SELECT data::text AS doc FROM chat_events WHERE message_id = '${message}'`))[0]!.doc;
      for (const doc of [row, event]) {
        expect(doc).not.toMatch(/Gone/);
        expect(doc).toMatch(/Kept title/);
        expect(doc).toMatch(/\(deleted\)/);
      }
      // A delete finds the rows naming its memories through the expression indexes, not by reading every chat.
      await db.sql.exec(`SET enable_seqscan = off`);
      const plan = (await db.sql.query<{ "QUERY PLAN": string }>(`EXPLAIN SELECT 1 FROM chat_messages WHERE (chat_named_memory_ids(tool_calls) || chat_named_memory_ids(citations)) && ARRAY['${kept}']`)).map((r) => r["QUERY PLAN"]).join("\n");
      expect(plan, plan).toMatch(/chat_messages_named_memory_ids_idx/);
      // The backfill looks each named id up through the memories' primary key (as text it reads and hashes
      // every memory), and runs before the index builds, whose locks stop every chat write until the commit.
      const sql = readFileSync(path.join(all, target, "migration.sql"), "utf8");
      const backfills = [...sql.matchAll(/^UPDATE [\s\S]*?;$/gm)].map((m) => m[0]);
      expect(backfills).toHaveLength(2);
      expect(sql.lastIndexOf("\nUPDATE ")).toBeLessThan(sql.indexOf("\nCREATE INDEX "));
      await db.sql.exec(`SET enable_hashjoin = off; SET enable_mergejoin = off`);
      for (const statement of backfills) {
        const lookups = (await db.sql.query<{ "QUERY PLAN": string }>(`EXPLAIN ${statement.slice(0, -1)}`)).map((r) => r["QUERY PLAN"]).join("\n");
        expect(lookups, lookups).toMatch(/Index (Only )?Scan using memories_pkey on memories x.*\n\s+Index Cond: \(id = /);
      }
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the migration counting attachments toward the storage quotas counts the ones stored before it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "engram-migrations-"));
    const db = await openDatabase({ dataDir: "memory://", migrate: false });
    try {
      const all = path.join(process.cwd(), "prisma", "migrations");
      const target = "20261129090000_attachment_storage_usage";
      for (const m of listMigrations(all)) if (m.name < target) cpSync(path.join(all, m.name), path.join(dir, m.name), { recursive: true });
      await migrate(db.sql, dir);
      const [user, hub, memory, other] = [newId(), newId(), newId(), newId()];
      await db.sql.exec(`
        INSERT INTO users (id, email, name, created_at, updated_at) VALUES ('${user}', 'b@example.test', 'B', now(), now());
        INSERT INTO hubs (id, name, slug, hub_type, owner_id, created_at, updated_at) VALUES ('${hub}', 'H', 'backfill-hub', 'team', '${user}', now(), now());
        INSERT INTO memories (id, hub_id, owner_id, title, content, content_type, content_hash, kind, stability, state, source, created_at, updated_at)
        VALUES ('${memory}', '${hub}', '${user}', 't', 'abcd', 'file', 'h1', 'semantic', 'stable', 'active', 'cli', now(), now()),
               ('${other}', '${hub}', '${user}', 't', 'ef', 'markdown', 'h2', 'semantic', 'stable', 'active', 'cli', now(), now());
        INSERT INTO attachments (id, memory_id, hub_id, object_key, filename, content_type, size_bytes, created_at)
        VALUES ('${newId()}', '${memory}', '${hub}', 'o/1', 'f.pdf', 'application/pdf', 1000, now());`);
      cpSync(path.join(all, target), path.join(dir, target), { recursive: true });
      expect((await migrate(db.sql, dir)).map((m) => m.name)).toEqual([target]);
      const counters = await db.prisma.storageUsage.findMany({ where: { scopeId: { in: [user, hub] } }, orderBy: { scope: "asc" } });
      expect(counters.map((c) => [c.scope, Number(c.bytes), c.memories])).toEqual([["hub", 1006, 2], ["inbox", 1006, 2], ["user", 1006, 2]]);
      // And from then on the trigger keeps them: a deleted memory takes its file's bytes with it.
      // In SQL: the client knows the columns of every migration, this database only those up to the target.
      await db.sql.exec(`DELETE FROM memories WHERE id = '${memory}'`);
      expect(Number((await db.prisma.storageUsage.findUniqueOrThrow({ where: { scope_scopeId: { scope: "user", scopeId: user } } })).bytes)).toBe(2);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the migration counting a user's storage only in hubs they are a member of recounts what was stored before it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "engram-migrations-"));
    const db = await openDatabase({ dataDir: "memory://", migrate: false });
    try {
      const all = path.join(process.cwd(), "prisma", "migrations");
      const target = "20261203060000_member_storage_usage";
      for (const m of listMigrations(all)) if (m.name < target) cpSync(path.join(all, m.name), path.join(dir, m.name), { recursive: true });
      await migrate(db.sql, dir);
      const [user, kept, left] = [newId(), newId(), newId()];
      await db.sql.exec(`
        INSERT INTO users (id, email, name, created_at, updated_at) VALUES ('${user}', 'm@example.test', 'M', now(), now());
        INSERT INTO hubs (id, name, slug, hub_type, owner_id, created_at, updated_at) VALUES ('${kept}', 'K', 'kept-hub', 'team', '${user}', now(), now()),
               ('${left}', 'L', 'left-hub', 'team', '${user}', now(), now());
        INSERT INTO hub_members (hub_id, user_id, role, joined_at) VALUES ('${kept}', '${user}', 'owner', now());
        INSERT INTO memories (id, hub_id, owner_id, title, content, content_type, content_hash, kind, stability, state, source, created_at, updated_at)
        VALUES ('${newId()}', '${kept}', '${user}', 't', 'abcd', 'markdown', 'h1', 'semantic', 'stable', 'active', 'cli', now(), now()),
               ('${newId()}', '${left}', '${user}', 't', 'efghij', 'markdown', 'h2', 'semantic', 'stable', 'active', 'cli', now(), now());`);
      expect(Number((await db.prisma.storageUsage.findUniqueOrThrow({ where: { scope_scopeId: { scope: "user", scopeId: user } } })).bytes)).toBe(10);
      cpSync(path.join(all, target), path.join(dir, target), { recursive: true });
      expect((await migrate(db.sql, dir)).map((m) => m.name)).toEqual([target]);
      const userCounter = async () => {
        const row = await db.prisma.storageUsage.findUniqueOrThrow({ where: { scope_scopeId: { scope: "user", scopeId: user } } });
        return [Number(row.bytes), row.memories];
      };
      expect(await userCounter()).toEqual([4, 1]);
      const shares = await db.prisma.hubOwnerUsage.findMany({ where: { ownerId: user } });
      expect(shares.map((s) => [s.hubId, Number(s.bytes), s.memories]).sort()).toEqual([[kept, 4, 1], [left, 6, 1]].sort());
      // And from then on the triggers keep them: joining the other hub adds its share.
      await db.sql.exec(`INSERT INTO hub_members (hub_id, user_id, role, joined_at) VALUES ('${left}', '${user}', 'contributor', now())`);
      expect(await userCounter()).toEqual([10, 2]);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a memory whose attachments are near 2 GiB can still be edited and deleted (the storage sums do not overflow)", async () => {
    const db = database.prisma;
    const now = new Date("2026-11-20T10:00:00.000Z");
    const user = await db.user.create({ data: { id: newId(), email: "big-file@example.test", name: "B", createdAt: now, updatedAt: now } });
    const hub = await db.hub.create({ data: { id: newId(), name: "B", slug: "big-file-hub", hubType: "team", ownerId: user.id, createdAt: now, updatedAt: now } });
    // A member, as a hub's owner is: a user's counter counts only the hubs they are in.
    await db.hubMember.create({ data: { hubId: hub.id, userId: user.id, role: "owner", joinedAt: now } });
    const memory = await db.memory.create({
      data: { id: newId(), hubId: hub.id, ownerId: user.id, title: "f", content: "text", contentType: "file", contentHash: "c".repeat(64), kind: "semantic", stability: "stable", boundary: "private", state: "active", source: "api", createdAt: now, updatedAt: now },
    });
    // ENGRAM_UPLOAD_MAX_BYTES may be 2147483647: one such file, as its attachment trigger counts it.
    await database.sql.exec(`
      INSERT INTO attachments (id, memory_id, hub_id, object_key, filename, content_type, size_bytes, created_at)
      VALUES ('${newId()}', '${memory.id}', '${hub.id}', 'o/big', 'big.bin', 'application/octet-stream', 2147483647, now())`);
    const userBytes = async () => Number((await db.storageUsage.findUniqueOrThrow({ where: { scope_scopeId: { scope: "user", scopeId: user.id } } })).bytes);
    expect(await userBytes()).toBe(2147483647 + 4);
    await db.memory.update({ where: { id: memory.id }, data: { content: "the extracted text, longer" } });
    expect(await userBytes()).toBe(2147483647 + 26);
    const [{ bytes }] = (await database.sql.query<{ bytes: string }>(
      `SELECT coalesce(sum(octet_length(content)::bigint + attachment_bytes), 0)::text AS bytes FROM memories WHERE id = '${memory.id}'`,
    )) as [{ bytes: string }];
    expect(Number(bytes)).toBe(2147483647 + 26);
    await db.memory.delete({ where: { id: memory.id } });
    expect(await userBytes()).toBe(0);
  });

  test("an update that sets a memory's updated_at moves it past the stored one; one that does not keep it", async () => {
    const db = database.prisma;
    const now = new Date("2026-11-20T10:00:00.000Z");
    const user = await db.user.create({ data: { id: newId(), email: "forward@example.test", name: "F", createdAt: now, updatedAt: now } });
    const hub = await db.hub.create({ data: { id: newId(), name: "F", slug: "forward-hub", hubType: "team", ownerId: user.id, createdAt: now, updatedAt: now } });
    const memory = await db.memory.create({
      data: { id: newId(), hubId: hub.id, ownerId: user.id, title: "f", content: "text", contentType: "markdown", contentHash: "d".repeat(64), kind: "semantic", stability: "stable", boundary: "private", state: "active", source: "api", createdAt: now, updatedAt: now },
    });
    const at = async (data: { updatedAt?: Date; title?: string }) => (await db.memory.update({ where: { id: memory.id }, data })).updatedAt.toISOString();
    expect(await at({ updatedAt: now })).toBe("2026-11-20T10:00:00.001Z");
    expect(await at({ updatedAt: new Date("2026-11-20T09:00:00.000Z") })).toBe("2026-11-20T10:00:00.002Z");
    expect(await at({ title: "no updated_at" })).toBe("2026-11-20T10:00:00.002Z");
    expect(await at({ updatedAt: new Date("2026-11-20T11:00:00.000Z") })).toBe("2026-11-20T11:00:00.000Z");
    // A bulk statement, row by row.
    await database.sql.exec(`UPDATE memories SET updated_at = '2026-11-20T11:00:00.000Z' WHERE id = '${memory.id}'`);
    expect((await db.memory.findUniqueOrThrow({ where: { id: memory.id } })).updatedAt.toISOString()).toBe("2026-11-20T11:00:00.001Z");
  });

  test("a memory's content_changed_at moves with its title or content, not with a write that leaves both alone", async () => {
    const db = database.prisma;
    const now = new Date("2026-11-20T10:00:00.000Z");
    const user = await db.user.create({ data: { id: newId(), email: "changed@example.test", name: "C", createdAt: now, updatedAt: now } });
    const hub = await db.hub.create({ data: { id: newId(), name: "C", slug: "changed-hub", hubType: "team", ownerId: user.id, createdAt: now, updatedAt: now } });
    const topic = await db.topic.create({ data: { id: newId(), hubId: hub.id, name: "T", createdBy: user.id, createdAt: now, updatedAt: now } });
    const memory = await db.memory.create({
      data: { id: newId(), hubId: hub.id, ownerId: user.id, title: "c", content: "text", contentType: "markdown", contentHash: "e".repeat(64), kind: "semantic", stability: "stable", boundary: "private", state: "active", source: "api", createdAt: now, updatedAt: now },
    });
    expect(memory.contentChangedAt.toISOString()).toBe("2026-11-20T10:00:00.000Z");
    const write = async (data: { updatedAt?: Date; title?: string; content?: string; topicId?: string; state?: string }) => {
      const row = await db.memory.update({ where: { id: memory.id }, data });
      return [row.updatedAt.toISOString(), row.contentChangedAt.toISOString()];
    };
    // Filing, archiving: updated_at moves, the text's time does not.
    expect(await write({ topicId: topic.id, updatedAt: new Date("2026-11-21T10:00:00.000Z") })).toEqual(["2026-11-21T10:00:00.000Z", "2026-11-20T10:00:00.000Z"]);
    expect(await write({ state: "archived", updatedAt: new Date("2026-11-22T10:00:00.000Z") })).toEqual(["2026-11-22T10:00:00.000Z", "2026-11-20T10:00:00.000Z"]);
    // The same text written again is no change.
    expect(await write({ content: "text", updatedAt: new Date("2026-11-23T10:00:00.000Z") })).toEqual(["2026-11-23T10:00:00.000Z", "2026-11-20T10:00:00.000Z"]);
    expect(await write({ content: "new text", updatedAt: new Date("2026-11-24T10:00:00.000Z") })).toEqual(["2026-11-24T10:00:00.000Z", "2026-11-24T10:00:00.000Z"]);
    // It takes updated_at as the forward trigger moved it.
    expect(await write({ title: "renamed", updatedAt: new Date("2026-11-01T10:00:00.000Z") })).toEqual(["2026-11-24T10:00:00.001Z", "2026-11-24T10:00:00.001Z"]);
    // A pipeline write of extracted text leaves updated_at, and the text keeps the time of the write that asked for it.
    expect(await write({ content: "extracted" })).toEqual(["2026-11-24T10:00:00.001Z", "2026-11-24T10:00:00.001Z"]);
  });

  test("the migration adding content_changed_at takes each existing memory's updated_at", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "engram-migrations-"));
    const db = await openDatabase({ dataDir: "memory://", migrate: false });
    try {
      const all = path.join(process.cwd(), "prisma", "migrations");
      const target = "20261130160000_memories_content_changed_at";
      for (const m of listMigrations(all)) if (m.name < target) cpSync(path.join(all, m.name), path.join(dir, m.name), { recursive: true });
      await migrate(db.sql, dir);
      const [user, hub, memory] = [newId(), newId(), newId()];
      await db.sql.exec(`
        INSERT INTO users (id, email, name, created_at, updated_at) VALUES ('${user}', 'cc@example.test', 'B', now(), now());
        INSERT INTO hubs (id, name, slug, hub_type, owner_id, created_at, updated_at) VALUES ('${hub}', 'H', 'cc-hub', 'team', '${user}', now(), now());
        INSERT INTO memories (id, hub_id, owner_id, title, content, content_type, content_hash, kind, stability, state, source, created_at, updated_at)
        VALUES ('${memory}', '${hub}', '${user}', 't', 'abcd', 'markdown', 'h1', 'semantic', 'stable', 'active', 'cli', '2026-01-01T00:00:00Z', '2026-03-04T05:06:07.089Z');`);
      cpSync(path.join(all, target), path.join(dir, target), { recursive: true });
      expect((await migrate(db.sql, dir)).map((m) => m.name)).toEqual([target]);
      // Only the column read: later migrations' columns are not there yet.
      const row = await db.prisma.memory.findUniqueOrThrow({ where: { id: memory }, select: { contentChangedAt: true } });
      expect(row.contentChangedAt.toISOString()).toBe("2026-03-04T05:06:07.089Z");
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("pgvector, the HNSW and full-text indexes and the partial unique indexes exist", async () => {
    const indexes = await database.sql.query<{ indexname: string; indexdef: string }>(`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'`);
    const byName = new Map(indexes.map((i) => [i.indexname, i.indexdef]));
    expect(byName.get("chunks_embedding_hnsw_idx")).toMatch(/USING hnsw \(embedding vector_cosine_ops\)/);
    expect(byName.get("chunks_search_vector_idx")).toMatch(/USING gin/);
    expect(byName.get("topics_deleting_at_idx")).toMatch(/WHERE \(deleting_at IS NOT NULL\)/);
    // A topic being deleted leaves its name free (lib/topics/hub-topics.ts leaves it out of the checks).
    expect(byName.get("topics_sibling_name_key")).toMatch(/^CREATE UNIQUE INDEX .* WHERE \(deleting_at IS NULL\)$/);
    for (const index of ["dream_actions_source_memory_ids_idx", "custom_boards_card_cite_memory_ids_idx", "custom_board_card_versions_cite_memory_ids_idx"]) {
      expect(byName.get(index), index).toMatch(/USING gin/);
    }
    expect(byName.get("ownership_transfers_one_pending")).toMatch(/WHERE \(state = 'pending'::text\)/);
    expect(byName.get("notifications_prune_settled_idx")).toMatch(/\(COALESCE\(resolved_at, created_at\)\) WHERE \(status <> 'pending'::text\)/);
    expect(byName.get("notifications_prune_pending_idx")).toMatch(/\(expires_at\) WHERE \(\(status = 'pending'::text\) AND \(expires_at IS NOT NULL\)\)/);
    const [{ type }] = await database.sql.query<{ type: string }>(
      `SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'`,
    ) as [{ type: string }];
    expect(type).toBe("vector(384)");
  });

  // A hard delete rewrites the bell rows naming its memories (drop-memory-copies.ts), by kind and
  // source: without an index each delete (and each batch of a hub's purge) read every notification.
  test("a delete finds the bell rows naming its memories through an index, not by reading every notification", async () => {
    const plan = await database.prisma.$transaction(async (tx) => {
      await tx.$executeRawUnsafe("SET LOCAL enable_seqscan = off");
      return tx.$queryRawUnsafe<{ "QUERY PLAN": string }[]>(
        `EXPLAIN UPDATE notifications SET payload = payload WHERE kind = 'memory_processing_failed' AND source_id = ANY(ARRAY['a', 'b'])`,
      );
    });
    expect(plan.map((row) => row["QUERY PLAN"]).join("\n")).toMatch(/Index .*notifications_kind_source_id_idx/);
  });

  test("the backfill drops what existing rows keep of memories deleted before the delete-time clean-up", async () => {
    const db = database.prisma;
    const now = new Date("2026-11-20T10:00:00.000Z");
    const user = await db.user.create({ data: { id: newId(), email: "backfill@example.test", name: "B", createdAt: now, updatedAt: now } });
    const hub = await db.hub.create({ data: { id: newId(), name: "B", slug: "backfill-hub", hubType: "team", ownerId: user.id, createdAt: now, updatedAt: now } });
    const kept = await db.memory.create({
      data: { id: newId(), hubId: hub.id, ownerId: user.id, title: "kept", content: "kept", contentType: "text", contentHash: "b".repeat(64), kind: "semantic", stability: "stable", boundary: "private", state: "active", source: "api", createdAt: now, updatedAt: now },
    });
    // Deleted before drop-memory-copies existed: only its id is left, in what named it.
    const gone = newId();
    const run = await db.dreamRun.create({ data: { id: newId(), hubId: hub.id, status: "completed", createdAt: now } });
    const action = (actionType: string, state: string, sourceMemoryIds: string[], details: object) =>
      db.dreamAction.create({ data: { id: newId(), runId: run.id, hubId: hub.id, actionType, state, sourceMemoryIds, reason: "r", details, createdAt: now } });
    const side = (id: string, text: string) => ({ id, title: "t", excerpt: text });
    const mergeGone = await action("merge", "applied", [gone, kept.id], { kept_id: kept.id, rewritten: true, original_content: "the passphrase is ocelot", original_content_hash: "h" });
    const mergeLive = await action("merge", "applied", [kept.id, kept.id], { kept_id: kept.id, rewritten: true, original_content: "still here" });
    const reviewGone = await action("contradiction", "pending_review", [kept.id, gone], { a: side(kept.id, "kept text"), b: side(gone, "the passphrase is ocelot") });
    const reviewLive = await action("contradiction", "pending_review", [kept.id, kept.id], { a: side(kept.id, "kept text"), b: side(kept.id, "kept text") });
    const decided = await action("contradiction", "resolved", [gone, kept.id], { a: side(gone, "the passphrase is ocelot"), b: side(kept.id, "kept text") });
    await db.dreamAction.update({ where: { id: decided.id }, data: { resolution: "keep_b", resolvedAt: now } });
    const bell = (sourceId: string) =>
      db.notification.create({ data: { id: newId(), userId: user.id, hubId: hub.id, kind: "review_contradiction", sourceKind: "dream_action", sourceId, createdAt: now } });
    const bellGone = await bell(reviewGone.id);
    const bellLive = await bell(reviewLive.id);
    // Chat turns written before the passages were dropped at turn end.
    const chat = await db.chatSession.create({ data: { id: newId(), ownerId: user.id, scopeType: "user_all_hubs", model: "local", activityAt: now, createdAt: now, updatedAt: now } });
    const recall = { id: "c1", name: "recall", status: "done", result: { memories: [{ id: gone, title: "t" }], sources: [{ id: gone, chunk_content: "the passphrase is ocelot" }] } };
    const push = { id: "c2", name: "push_memory", status: "done", result: { id: kept.id } };
    const message = (sequence: number, status: string, finishedAt: Date | null, toolCalls: object[]) =>
      db.chatMessage.create({ data: { id: newId(), sessionId: chat.id, sequence, role: "assistant", authorUserId: user.id, status, toolCalls, finishedAt, createdAt: now, updatedAt: now } });
    const finished = await message(1, "completed", now, [recall, push, { id: "c3", name: "recall", status: "running" }]);
    const running = await message(2, "running", null, [recall]);
    // Custom boards whose card, or a version of its history, cites the deleted memory.
    const later = new Date("2026-11-21T10:00:00.000Z");
    const board = (title: string, status: string, cardCiteMemoryIds: string[]) =>
      db.customBoard.create({
        data: {
          id: newId(), hubId: hub.id, createdBy: user.id, title, instruction: "What is the passphrase?", status, cardPayload: { answer: "the passphrase is ocelot" },
          cardCiteMemoryIds, cardState: "fresh", cardContentUpdatedAt: later, cardCreatedAt: now, cardAskedAt: later, createdAt: now, updatedAt: now,
        },
      });
    const boardGone = await board("gone", "active", [gone, kept.id]);
    const boardPaused = await board("paused", "paused", [gone]);
    const boardLive = await board("live", "active", [kept.id]);
    const verdict = (boardId: string, contentProducedAt: Date) =>
      db.customBoardFeedback.create({ data: { boardId, contentProducedAt, userId: user.id, verdict: "accurate", createdAt: now, updatedAt: now } });
    await verdict(boardGone.id, later);
    await verdict(boardLive.id, later);
    const version = (boardId: string, citeMemoryIds: string[], contentProducedAt: Date) =>
      db.customBoardCardVersion.create({ data: { id: newId(), boardId, payload: { answer: "the passphrase is ocelot" }, citeMemoryIds, contentProducedAt, createdAt: now } });
    const between = new Date("2026-11-20T12:00:00.000Z");
    const versionGone = await version(boardLive.id, [gone], now);
    const versionLive = await version(boardLive.id, [kept.id], between);
    await verdict(boardLive.id, now);
    await verdict(boardLive.id, between);

    await database.sql.exec(readFileSync(path.join(process.cwd(), "prisma/migrations/20261129180000_drop_deleted_memory_copies/migration.sql"), "utf8"));

    const after = async (id: string) => db.dreamAction.findUniqueOrThrow({ where: { id } });
    expect((await after(mergeGone.id)).details).toEqual({ kept_id: kept.id, rewritten: true, original_content_hash: "h" });
    expect(await after(mergeLive.id)).toEqual(mergeLive);
    const closed = await after(reviewGone.id);
    expect(closed).toMatchObject({ state: "resolved", resolution: "memory_deleted", details: { a: side(kept.id, "kept text"), b: { id: gone, title: "t" } } });
    expect(closed.resolvedAt).not.toBeNull();
    expect(await after(reviewLive.id)).toEqual(reviewLive);
    expect(await after(decided.id)).toMatchObject({ state: "resolved", resolution: "keep_b", details: { a: { id: gone, title: "t" }, b: side(kept.id, "kept text") } });
    expect(await db.notification.findUniqueOrThrow({ where: { id: bellGone.id } })).toMatchObject({ status: "expired" });
    expect(await db.notification.findUniqueOrThrow({ where: { id: bellLive.id } })).toEqual(bellLive);
    const { sources: _passages, ...found } = recall.result;
    expect((await db.chatMessage.findUniqueOrThrow({ where: { id: finished.id } })).toolCalls).toEqual([
      { ...recall, result: found },
      push,
      { id: "c3", name: "recall", status: "running" },
    ]);
    expect((await db.chatMessage.findUniqueOrThrow({ where: { id: running.id } })).toolCalls).toEqual([recall]);
    expect(JSON.stringify(await db.dreamAction.findMany({ where: { runId: run.id } }))).not.toContain("ocelot");
    const emptied = { cardPayload: null, cardCiteMemoryIds: [], cardState: null, cardContentUpdatedAt: null, cardCreatedAt: null, cardAskedAt: null };
    expect(await db.customBoard.findUniqueOrThrow({ where: { id: boardGone.id } })).toMatchObject({ ...emptied, status: "cooking" });
    expect(await db.customBoard.findUniqueOrThrow({ where: { id: boardPaused.id } })).toMatchObject({ ...emptied, status: "paused" });
    expect(await db.customBoard.findUniqueOrThrow({ where: { id: boardLive.id } })).toMatchObject({ status: "active", cardCiteMemoryIds: [kept.id] });
    expect(await db.customBoardFeedback.findMany({ where: { boardId: boardGone.id } })).toEqual([]);
    // The live card's verdict and the live version's stay; the deleted version's went with it.
    expect((await db.customBoardFeedback.findMany({ where: { boardId: boardLive.id }, orderBy: { contentProducedAt: "asc" } })).map((f) => f.contentProducedAt)).toEqual([between, later]);
    expect(await db.customBoardCardVersion.findUnique({ where: { id: versionGone.id } })).toBeNull();
    expect(await db.customBoardCardVersion.findUnique({ where: { id: versionLive.id } })).toEqual(versionLive);
  });

  test("the backfill clears superseded_by of memories a PATCH restored before a restore cleared it; archived ones keep it", async () => {
    const db = database.prisma;
    const now = new Date("2026-11-20T10:00:00.000Z");
    const user = await db.user.create({ data: { id: newId(), email: "superseded@example.test", name: "S", createdAt: now, updatedAt: now } });
    const hub = await db.hub.create({ data: { id: newId(), name: "S", slug: "superseded-hub", hubType: "team", ownerId: user.id, createdAt: now, updatedAt: now } });
    const memory = (title: string, state: string, supersededBy: string | null) =>
      db.memory.create({
        data: { id: newId(), hubId: hub.id, ownerId: user.id, title, content: title, contentType: "text", contentHash: createHash("sha256").update(title).digest("hex"), kind: "semantic", stability: "stable", boundary: "private", state, supersededBy, source: "api", createdAt: now, updatedAt: now },
      });
    const kept = await memory("Kept", "active", null);
    const restored = await memory("Restored by PATCH", "active", kept.id);
    const merged = await memory("Still merged", "archived", kept.id);

    await database.sql.exec(readFileSync(path.join(process.cwd(), "prisma/migrations/20261201050000_clear_active_superseded_by/migration.sql"), "utf8"));

    expect(await db.memory.findUniqueOrThrow({ where: { id: restored.id } })).toEqual({ ...restored, supersededBy: null });
    expect(await db.memory.findUniqueOrThrow({ where: { id: merged.id } })).toEqual(merged);
    expect(await db.memory.findUniqueOrThrow({ where: { id: kept.id } })).toEqual(kept);
  });

  test("the backfill drops the titles existing rows quote of memories deleted before the delete-time clean-up of titles", async () => {
    const db = database.prisma;
    const now = new Date("2026-11-20T10:00:00.000Z");
    const user = await db.user.create({ data: { id: newId(), email: "titles@example.test", name: "T", createdAt: now, updatedAt: now } });
    const hub = await db.hub.create({ data: { id: newId(), name: "T", slug: "titles-hub", hubType: "team", ownerId: user.id, createdAt: now, updatedAt: now } });
    const kept = await db.memory.create({
      data: { id: newId(), hubId: hub.id, ownerId: user.id, title: "Kept", content: "kept", contentType: "text", contentHash: "c".repeat(64), kind: "semantic", stability: "stable", boundary: "private", state: "active", source: "api", createdAt: now, updatedAt: now },
    });
    const gone = newId();
    const reasons = {
      merge: `"SECRET-GONE" is a near-duplicate (similarity 0.94, word overlap 0.60) of the newer "Kept"`,
      contradiction: `"Kept" and "SECRET-GONE" disagree: "timeout" is "30 seconds" in one and "SECRET-VALUE" in the other`,
      archive: `"SECRET-GONE" was never read and has not changed for 200 days`,
      live: `"Kept" was never read and has not changed for 200 days`,
    };
    const report = ["Merged 1 near-duplicate.", "", "## Merged near-duplicates (1)", "", `- ${reasons.merge}; the older one is archived (undo to restore it)`, "", "## Contradictions to review (1)", "", `- ${reasons.contradiction} — keep A, keep B or keep both`, "", "## Archived as stale (2)", "", `- ${reasons.archive}`, `- ${reasons.live}`].join("\n");
    const run = await db.dreamRun.create({ data: { id: newId(), hubId: hub.id, status: "completed", report, createdAt: now } });
    const action = (actionType: string, sourceMemoryIds: string[], reason: string, details: object) =>
      db.dreamAction.create({ data: { id: newId(), runId: run.id, hubId: hub.id, actionType, state: "applied", sourceMemoryIds, reason, details, createdAt: now } });
    const merge = await action("merge", [gone, kept.id], reasons.merge, { archived_id: gone, kept_id: kept.id });
    const review = await action("contradiction", [kept.id, gone], reasons.contradiction, { key: "timeout", values: ["30 seconds", "SECRET-VALUE"], a: { id: kept.id, title: "Kept" }, b: { id: gone, title: "SECRET-GONE" } });
    const archive = await action("archive", [gone], reasons.archive, { previous_updated_at: now.toISOString() });
    const live = await action("archive", [kept.id], reasons.live, { previous_updated_at: now.toISOString() });
    const bell = (kind: string, sourceId: string, payload: object) =>
      db.notification.create({ data: { id: newId(), userId: user.id, hubId: hub.id, kind, sourceKind: "x", sourceId, payload, createdAt: now } });
    const reviewBell = await bell("review_contradiction", review.id, { memory_a: { id: kept.id, title: "Kept" }, memory_b: { id: gone, title: "SECRET-GONE" }, reason: reasons.contradiction });
    const failedBell = await bell("memory_processing_failed", gone, { memory: { id: gone, title: "SECRET-GONE" }, error: "e" });
    const liveBell = await bell("memory_processing_failed", kept.id, { memory: { id: kept.id, title: "Kept" }, error: "e" });

    await database.sql.exec(readFileSync(path.join(process.cwd(), "prisma/migrations/20261130020000_drop_deleted_memory_titles/migration.sql"), "utf8"));

    const rows = await db.dreamAction.findMany({ where: { runId: run.id } });
    expect(JSON.stringify(rows)).not.toMatch(/SECRET/);
    const after = (id: string) => rows.find((row) => row.id === id)!;
    expect(after(merge.id)).toMatchObject({ reason: DELETED_REASON.merge, details: merge.details });
    expect(after(review.id)).toMatchObject({ reason: DELETED_REASON.contradiction, details: { key: "timeout", a: { id: kept.id, title: "Kept" }, b: { id: gone, title: "(deleted)" } } });
    expect(after(review.id).details).not.toHaveProperty("values");
    expect(after(archive.id).reason).toBe(DELETED_REASON.archive);
    expect(after(live.id)).toEqual(live);
    const rewritten = (await db.dreamRun.findUniqueOrThrow({ where: { id: run.id } })).report;
    expect(rewritten).not.toMatch(/SECRET/);
    expect(rewritten).toContain(`- ${DELETED_REASON.merge}; the older one is archived`);
    expect(rewritten).toContain(`- ${reasons.live}`);
    expect((await db.notification.findUniqueOrThrow({ where: { id: reviewBell.id } })).payload).toEqual({ memory_a: { id: kept.id, title: "Kept" }, memory_b: { id: gone, title: "(deleted)" }, reason: DELETED_REASON.contradiction });
    expect((await db.notification.findUniqueOrThrow({ where: { id: failedBell.id } })).payload).toEqual({ memory: { id: gone, title: "(deleted)" }, error: "e" });
    expect(await db.notification.findUniqueOrThrow({ where: { id: liveBell.id } })).toEqual(liveBell);
  });

  test("migrations are recorded as Prisma Migrate records them", async () => {
    const rows = await database.sql.query<{ migration_name: string; checksum: string; finished_at: Date | null; applied_steps_count: number }>(
      `SELECT migration_name, checksum, finished_at, applied_steps_count FROM _prisma_migrations ORDER BY migration_name`,
    );
    const files = listMigrations();
    expect(rows.map((r) => r.migration_name)).toEqual(files.map((f) => f.name));
    for (const [i, row] of rows.entries()) {
      expect(row.checksum).toBe(createHash("sha256").update(files[i]!.sql).digest("hex"));
      expect(row.finished_at).not.toBeNull();
      expect(row.applied_steps_count).toBe(1);
    }
    expect(await migrate(database.sql)).toEqual([]);
  });

  test("an edited applied migration or a broken new one stops start-up without half-applying", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "engram-migrations-"));
    try {
      cpSync(path.join(process.cwd(), "prisma", "migrations"), dir, { recursive: true });
      const db = await openTestDatabase({ migrate: false });
      try {
        const broken = path.join(dir, "99990101000000_broken");
        cpSync(path.join(dir, listMigrations(dir)[0]!.name), broken, { recursive: true });
        const { writeFileSync } = await import("node:fs");
        writeFileSync(path.join(broken, "migration.sql"), `CREATE TABLE "half_done" (id int);\nSELECT * FROM no_such_table;`);
        await expect(migrate(db.sql, dir)).rejects.toThrow(/99990101000000_broken failed/);
        const [{ exists }] = (await db.sql.query<{ exists: boolean }>(`SELECT to_regclass('half_done') IS NOT NULL AS exists`)) as [{ exists: boolean }];
        expect(exists).toBe(false);
        rmSync(broken, { recursive: true });
        appendFileSync(path.join(dir, listMigrations(dir)[0]!.name, "migration.sql"), "\n-- edited\n");
        await expect(migrate(db.sql, dir)).rejects.toThrow(/was modified after it was applied/);
      } finally {
        await db.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a migration whose record cannot be written is not left applied: the next start applies it again", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "engram-migrations-"));
    try {
      const db = await openTestDatabase({ migrate: false });
      try {
        await migrate(db.sql, dir); // no migrations yet: creates the record table
        const { mkdirSync, writeFileSync } = await import("node:fs");
        mkdirSync(path.join(dir, "20990101000000_probe"));
        writeFileSync(path.join(dir, "20990101000000_probe", "migration.sql"), `CREATE TABLE "record_probe" (id int);`);
        // The record's write fails after the migration's statements ran (in production: the process or connection dies in between).
        await db.sql.exec(`CREATE FUNCTION refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'record refused'; END $$;
          CREATE TRIGGER refuse_record BEFORE INSERT ON "_prisma_migrations" FOR EACH ROW EXECUTE FUNCTION refuse_record();`);
        await expect(migrate(db.sql, dir)).rejects.toThrow(/record refused/);
        const probe = async () => (await db.sql.query<{ exists: boolean }>(`SELECT to_regclass('record_probe') IS NOT NULL AS exists`))[0]!.exists;
        expect(await probe()).toBe(false);
        await db.sql.exec(`DROP TRIGGER refuse_record ON "_prisma_migrations"`);
        expect((await migrate(db.sql, dir)).map((m) => m.name)).toEqual(["20990101000000_probe"]);
        expect(await probe()).toBe(true);
      } finally {
        await db.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("migration 20261202010000_email_code_sent_at", () => {
  test("the backfill marks every code mailed before it as sent, a superseded one too; only a code asked for a moment ago stays unsent", async () => {
    const db = database.prisma;
    const email = "sent-at@example.test";
    const at = (msAgo: number) => new Date(Date.now() - msAgo);
    const code = (createdAt: Date, consumedAt: Date | null) =>
      db.emailSignInCode.create({ data: { id: newId(createdAt.getTime()), email, codeHash: "c".repeat(64), expiresAt: new Date(createdAt.getTime() + 600_000), consumedAt, createdAt } });
    const mailed = (createdAt: Date, sentAt: Date | null) =>
      db.mailOutbox.create({ data: { id: newId(createdAt.getTime()), toAddress: email, subject: "Your Engram sign-in code", body: "b", kind: "sign_in_code", createdAt, sentAt } });
    // Mailed, and its activation skipped because a newer code existed: it kept consumed_at = created_at.
    const supersededAt = at(600_000);
    const superseded = await code(supersededAt, supersededAt);
    await mailed(supersededAt, new Date(supersededAt.getTime() + 1_500));
    // Mailed under the old code with no outbox row left (pruned), never activated either.
    const unrecordedAt = at(300_000);
    const unrecorded = await code(unrecordedAt, unrecordedAt);
    const working = await code(at(120_000), null);
    // Its send may still be under way.
    const sendingAt = at(5_000);
    const sending = await code(sendingAt, sendingAt);

    await database.sql.exec(`ALTER TABLE "email_sign_in_codes" DROP COLUMN "sent_at"`);
    await database.sql.exec(readFileSync(path.join(process.cwd(), "prisma/migrations/20261202010000_email_code_sent_at/migration.sql"), "utf8"));

    const sentAt = async (id: string) => (await db.emailSignInCode.findUniqueOrThrow({ where: { id } })).sentAt;
    expect(await sentAt(superseded.id)).toEqual(new Date(supersededAt.getTime() + 1_500));
    expect(await sentAt(unrecorded.id)).toEqual(unrecordedAt);
    expect(await sentAt(working.id)).toEqual(working.createdAt);
    expect(await sentAt(sending.id)).toBeNull();
  });
});
