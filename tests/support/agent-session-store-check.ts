import { expect } from "vitest";
import { blobStore, readAll } from "@/lib/blobs/blob-store.ts";
import type { Client, Harness } from "./harness.ts";

/**
 * The configured blob store holds agent session files: each version is written server-side, and
 * replacing a version deletes the previous object. The same contract for every store adapter.
 */
export async function checkAgentSessionsInStore(h: Harness, client: Client, sessionId: string): Promise<void> {
  const first = await client.put("/v1/agent-sessions", { agent: "codex", session_id: sessionId, content: "one\n" });
  expect(first.status, first.text).toBe(201);
  const storeKey = async () => (await h.db.agentSession.findUniqueOrThrow({ where: { id: first.body.data.id } })).storeKey;
  const key1 = await storeKey();
  const store = await blobStore();
  expect((await readAll(store, key1)).toString("utf8")).toBe("one\n");
  expect((await client.put("/v1/agent-sessions", { agent: "codex", session_id: sessionId, content: "one\ntwo\n" })).status).toBe(200);
  const key2 = await storeKey();
  expect(await store.head(key1)).toBeNull();
  expect((await client.get(`/v1/agent-sessions?session_id=${sessionId}`)).body.data.sessions[0].content).toBe("one\ntwo\n");
  expect((await readAll(store, key2)).toString("utf8")).toBe("one\ntwo\n");
}
