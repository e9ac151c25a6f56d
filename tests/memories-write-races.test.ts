import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { createHash } from "node:crypto";
import { updateMemory } from "@/lib/memories/update-memory.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h.close());

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

describe("PATCH against a re-push of the same source_path", () => {
  // A PATCH writes only if updated_at is still the one it read, which works only while every write
  // moves updated_at forward. A re-push wrote its request's start instead: when that was the instant
  // already stored (the same millisecond, or behind a burst of edits that ran updated_at ahead of the
  // clock), the PATCH's write went through on a stale read and put back the old content's hash.
  test("a re-push that lands between a PATCH's read and its write makes the PATCH read again", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now());
      const created = (await ann.post("/v1/memories", { content: "version one of the notes", source_path: "notes/race.md" })).body.data;
      const push = async () => {
        const res = await ann.post("/v1/memories", { content: "version two of the notes", source_path: "notes/race.md" });
        expect(res.status).toBe(200);
        expect(res.body.data.version).toBe(2);
      };
      const patched = await updateMemory(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], push)), created.id, { tags: ["edited"] });
      expect(patched).toMatchObject({ tags: ["edited"], content: "version two of the notes", content_hash: sha256("version two of the notes"), version: 2 });
      const row = await h.db.memory.findUniqueOrThrow({ where: { id: created.id } });
      expect(row.content).toBe("version two of the notes");
      expect(row.contentHash).toBe(sha256("version two of the notes"));
      expect(row.tags).toEqual(["edited"]);
    } finally {
      vi.useRealTimers();
    }
  });
});
