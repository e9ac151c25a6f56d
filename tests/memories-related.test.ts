import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { charactersRead } from "./support/characters-read.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";

// GET /v1/memories/{id}/related: what one request costs (tests/recall.test.ts covers the ranking).

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  await h?.close();
});

describe("GET /v1/memories/{id}/related", () => {
  it.skipIf(testPostgres())("reads the memory's opening words, not its whole text, to find neighbours before it is embedded", async () => {
    const long = (await ann.post("/v1/memories", { content: `# Zebrafish tank log\n\nRinse the filters weekly.\n\n${"The water was tested again and logged. ".repeat(25_000)}` })).body.data.id;
    const short = (await ann.post("/v1/memories", { content: "# Zebrafish tank filters\n\nRinse the tank filters weekly." })).body.data.id;
    let res: Awaited<ReturnType<Client["get"]>> | undefined;
    const read = await charactersRead(h.database, async () => {
      res = await ann.get(`/v1/memories/${long}/related`);
    });
    expect(res!.status).toBe(200);
    expect(res!.body.data.map((entry: { memory: { id: string } }) => entry.memory.id)).toContain(short);
    // A memory of about 1 MB: the old lookup read all of it.
    expect(read).toBeLessThan(200_000);
  });
});
