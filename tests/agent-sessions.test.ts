import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness } from "./support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("/v1/agent-sessions", () => {
  it("stores, replaces, lists and reads back a session file, per owner", async () => {
    const ann = await h.user("Ann");
    const first = await ann.put("/v1/agent-sessions", { agent: "claude-code", session_id: "s-1", content: '{"role":"user"}\n', title: "Fix the build" });
    expect(first.status, first.text).toBe(201);
    expect(first.body.data).toMatchObject({ agent: "claude-code", session_id: "s-1", title: "Fix the build", size_bytes: 16, content_type: "application/x-ndjson" });
    expect(first.body.data.content).toBeUndefined();
    const again = await ann.put("/v1/agent-sessions", { agent: "claude-code", session_id: "s-1", content: '{"role":"user"}\n{"role":"assistant"}\n' });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ id: first.body.data.id, title: "Fix the build", size_bytes: 37 });
    await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "s-2", content: "x" });
    const all = await ann.get("/v1/agent-sessions");
    expect(all.body.data.sessions.map((s: { session_id: string }) => s.session_id)).toEqual(["s-2", "s-1"]);
    expect(all.body.data.sessions[0].content).toBeUndefined();
    const one = await ann.get("/v1/agent-sessions?agent=claude-code&session_id=s-1");
    expect(one.body.data.sessions).toHaveLength(1);
    expect(one.body.data.sessions[0].content).toBe('{"role":"user"}\n{"role":"assistant"}\n');
    const paged = await ann.get("/v1/agent-sessions?limit=1");
    expect(paged.body.data.has_more).toBe(true);
    const next = await ann.get(`/v1/agent-sessions?limit=1&cursor=${encodeURIComponent(paged.body.data.next_cursor)}`);
    expect(next.body.data.sessions.map((s: { session_id: string }) => s.session_id)).toEqual(["s-1"]);
    const bob = await h.user("Bob");
    expect((await bob.get("/v1/agent-sessions?session_id=s-1")).body.data.sessions).toEqual([]);
  });

  it("rejects oversized or incomplete sessions without writing", async () => {
    const ann = await h.user("Big");
    const big = await ann.put("/v1/agent-sessions", { agent: "codex", session_id: "big", content: "x".repeat(5 * 1024 * 1024 + 1) });
    expect(big.status).toBe(413);
    expect((await ann.put("/v1/agent-sessions", { agent: "codex", content: "x" })).status).toBe(400);
    expect((await ann.get("/v1/agent-sessions")).body.data.sessions).toEqual([]);
  });
});
