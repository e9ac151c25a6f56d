import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

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

/** Characters the embedded database returned to requests while `fn` ran (PostgreSQL: undefined). */
async function charactersRead(fn: () => Promise<void>): Promise<number | undefined> {
  const scheduler = h.database.scheduler;
  if (!scheduler) {
    await fn();
    return undefined;
  }
  const run = scheduler.run.bind(scheduler);
  let read = 0;
  scheduler.run = async (background, statement) => {
    const result = await run(background, statement);
    if (!background) read += JSON.stringify(result ?? null).length;
    return result;
  };
  try {
    await fn();
  } finally {
    scheduler.run = run;
  }
  return read;
}

describe("GET /v1/memories/{id}/related", () => {
  it("reads the memory's opening words, not its whole text, to find neighbours before it is embedded", async () => {
    const long = (await ann.post("/v1/memories", { content: `# Zebrafish tank log\n\nRinse the filters weekly.\n\n${"The water was tested again and logged. ".repeat(25_000)}` })).body.data.id;
    const short = (await ann.post("/v1/memories", { content: "# Zebrafish tank filters\n\nRinse the tank filters weekly." })).body.data.id;
    let res: Awaited<ReturnType<Client["get"]>> | undefined;
    const read = await charactersRead(async () => {
      res = await ann.get(`/v1/memories/${long}/related`);
    });
    expect(res!.status).toBe(200);
    expect(res!.body.data.map((entry: { memory: { id: string } }) => entry.memory.id)).toContain(short);
    // A memory of about 1 MB: the old lookup read all of it.
    if (read !== undefined) expect(read).toBeLessThan(200_000);
  });
});
