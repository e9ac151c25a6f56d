import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// A write that retries when its conditional statement matched nothing must give up after a few
// attempts: when the permission check in code and the one in SQL disagree, or the row keeps
// changing, an unbounded retry held the request (and a connection) for good.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  // Stands for the SQL guard refusing what the code allowed: the DELETE of a memory titled
  // "Kept" matches no row, as a memoryWriteGuard that disagrees with canDeleteMemory would.
  await h.db.$executeRawUnsafe(`
    CREATE FUNCTION test_keep_memory() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF OLD.title = 'Kept' THEN RETURN NULL; END IF;
      RETURN OLD;
    END $$`);
  await h.db.$executeRawUnsafe(`CREATE TRIGGER test_keep_memory BEFORE DELETE ON memories FOR EACH ROW EXECUTE FUNCTION test_keep_memory()`);
});
afterAll(() => h?.close());

describe("DELETE /v1/memories/:id when the delete keeps matching nothing", () => {
  test("answers 409 conflict after a bounded number of attempts, and the memory stays", async () => {
    const created = (await ann.post("/v1/memories", { title: "Kept", content: "A memory the database keeps." })).body.data;
    // Raced against a timer: without a bound the request never answers.
    const res = await Promise.race([
      ann.delete(`/v1/memories/${created.id}`),
      new Promise<"still retrying after 10 s">((resolve) => setTimeout(() => resolve("still retrying after 10 s"), 10_000)),
    ]);
    expect(res === "still retrying after 10 s" ? res : res.status).toBe(409);
    expect(res !== "still retrying after 10 s" && res.body.error.code).toBe("conflict");
    expect(await h.db.memory.count({ where: { id: created.id } })).toBe(1);
    // An ordinary delete still goes through at the first attempt.
    const other = (await ann.post("/v1/memories", { title: "Gone", content: "A memory that goes." })).body.data;
    expect((await ann.delete(`/v1/memories/${other.id}`)).status).toBe(200);
    expect(await h.db.memory.count({ where: { id: other.id } })).toBe(0);
  });
});
