import { describe, expect, it } from "vitest";
import pg from "pg";
import { testPostgres } from "./support/harness.ts";
import { openMcpToolCalls } from "./support/mcp-tool-calls.ts";

// A tool's error result carried only { code, message }: REST's details were dropped, so an agent was
// told the first invalid field alone (never the others), and not how long to wait after `unavailable`
// (REST's Retry-After) or `rate_limited`. Details now come with the error, bounded.

const mcp = openMcpToolCalls("/mcp");

describe("a tool's error result", () => {
  it("names every invalid field, in its structured content and its text", async () => {
    const res = await mcp.call("engram_push", { content: "   ", title: "x".repeat(1000), tags: ["ok", " "] });
    expect(res.result.isError).toBe(true);
    const paths = (res.error.details.issues as { path: string }[]).map((i) => i.path).sort();
    expect(paths).toEqual(["content", "tags.1", "title"]);
    for (const path of paths) expect(res.text).toContain(path);
  });

  it("is bounded: a call with a hundred invalid items lists 20 of them, and says how many more", async () => {
    const res = await mcp.call("engram_capture", { summary: "Done.", decisions: Array.from({ length: 100 }, () => "d".repeat(2001)) });
    expect(res.error.code).toBe("invalid_request");
    expect(res.error.details.issues).toHaveLength(20);
    expect(res.error.details.issues_omitted).toBe(80);
    expect(JSON.stringify(res.result).length).toBeLessThan(8_000);
  });

  // engram_hub_members's hub_id is required, yet a blank one was taken as none and then looked up:
  // "Hub not found", as if a hub had been named and was out of reach, where the call is invalid.
  it("refuses a blank required hub_id as invalid, naming it", async () => {
    for (const hubId of ["", "   "]) {
      const res = await mcp.call("engram_hub_members", { hub_id: hubId });
      expect(res.error).toMatchObject({ code: "invalid_request", details: { issues: [{ path: "hub_id" }] } });
    }
  });

  it("carries REST's other details too", async () => {
    for (let i = 0; i < 11; i++) await mcp.h.teamHub(mcp.ann);
    const res = await mcp.call("engram_topics", {});
    expect(res.error).toMatchObject({ code: "invalid_request", details: { max_hubs: 10 } });
  });

  it.skipIf(!testPostgres())("says when to retry after unavailable (REST's Retry-After)", async () => {
    const memory = (await mcp.ann.post("/v1/memories", { title: "Held", content: "A memory another transaction holds." })).body.data;
    const holder = new pg.Client({ connectionString: mcp.h.url! });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT 1 FROM memories WHERE id = $1 FOR UPDATE", [memory.id]);
      const pending = mcp.call("engram_forget", { id: memory.id });
      let blocked: number | undefined;
      for (let waited = 0; blocked === undefined; waited += 20) {
        const { rows } = await holder.query("SELECT l.pid FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid)) LIMIT 1");
        blocked = rows[0]?.pid;
        if (waited > 20_000) throw new Error("engram_forget never waited for the held row");
        if (blocked === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await holder.query("SELECT pg_terminate_backend($1)", [blocked]);
      const res = await pending;
      expect(res.error).toMatchObject({ code: "unavailable", details: { retry_after: 2 } });
      expect(res.text).toMatch(/retry in 2 s/i);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
    }
  });
});
