import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// A re-push to the same source_path writes in place. Naming content (or title) in that UPDATE, even
// unchanged, writes a new out-of-line (TOAST) copy of the whole text, up to MiBs, and rebuilds the
// search vector from it (memories_search_vector_trg is BEFORE UPDATE OF title, content): a re-push that
// changed only the tags or the title must not name the text. `UPDATE OF` triggers fire whenever the
// column is named in SET, so the test counts those.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  await h.db.$executeRawUnsafe(`CREATE TABLE test_named_columns (col text)`);
  await h.db.$executeRawUnsafe(`
    CREATE FUNCTION test_named_content() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO test_named_columns VALUES ('content'); RETURN NEW; END $$`);
  await h.db.$executeRawUnsafe(`
    CREATE FUNCTION test_named_title() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO test_named_columns VALUES ('title'); RETURN NEW; END $$`);
  await h.db.$executeRawUnsafe(`CREATE TRIGGER test_named_content BEFORE UPDATE OF content ON memories FOR EACH ROW EXECUTE FUNCTION test_named_content()`);
  await h.db.$executeRawUnsafe(`CREATE TRIGGER test_named_title BEFORE UPDATE OF title ON memories FOR EACH ROW EXECUTE FUNCTION test_named_title()`);
});
beforeEach(async () => {
  await h.db.$executeRawUnsafe(`DELETE FROM test_named_columns`);
});
afterAll(() => h?.close());

/** Which of content and title the UPDATEs since the last call named, and how often. */
async function named(): Promise<Record<string, number>> {
  const rows = await h.db.$queryRawUnsafe<{ col: string; n: number }[]>(`SELECT col, count(*)::int AS n FROM test_named_columns GROUP BY col`);
  await h.db.$executeRawUnsafe(`DELETE FROM test_named_columns`);
  return Object.fromEntries(rows.map((row) => [row.col, row.n]));
}

describe("a re-push to the same source_path", () => {
  test("writes the text only when it changed, and the title only when it changed", async () => {
    const content = "The deploy checklist. ".repeat(2_000);
    const path = "notes/checklist.md";
    const first = await ann.post("/v1/memories", { title: "Checklist", content, source_path: path, tags: ["ops"] });
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    await named();

    const retitled = await ann.post("/v1/memories", { title: "Deploy checklist", content, source_path: path, tags: ["ops"] });
    expect(retitled.status, JSON.stringify(retitled.body)).toBe(200);
    expect(retitled.body.data).toMatchObject({ id: first.body.data.id, title: "Deploy checklist", version: 1 });
    expect(await named()).toEqual({ title: 1 });

    const retagged = await ann.post("/v1/memories", { title: "Deploy checklist", content, source_path: path, tags: ["ops", "deploy"] });
    expect(retagged.status, JSON.stringify(retagged.body)).toBe(200);
    expect(retagged.body.data).toMatchObject({ title: "Deploy checklist", tags: ["ops", "deploy"], version: 1 });
    expect(await named()).toEqual({});

    // New text is written (and the title with it only when it changes).
    const rewritten = await ann.post("/v1/memories", { title: "Deploy checklist", content: `${content}And roll back.`, source_path: path });
    expect(rewritten.status, JSON.stringify(rewritten.body)).toBe(200);
    expect(rewritten.body.data).toMatchObject({ title: "Deploy checklist", version: 2 });
    expect(await named()).toEqual({ content: 1 });

    const row = await h.db.memory.findUniqueOrThrow({ where: { id: first.body.data.id } });
    expect(row.content).toBe(`${content}And roll back.`);
    expect(row.title).toBe("Deploy checklist");
    expect(row.tags).toEqual(["ops", "deploy"]);
  });
});
