import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadCandidates, type CandidatesInput } from "@/lib/recall/load-candidates.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Recall demotes a candidate memory that never mentions a name the query asks about. The check
// (engram_recall_candidates) looks each of the name's lexemes up in the memory's tsvector: a name
// counts as mentioned when at least half of its lexemes occur. Both of the function's branches: the
// static one (no filters) and the dynamic one (any filter).

let h: Harness;
let ann: Client;
let kafka: string;
let rebalance: string;
const lexemes = new Map<string, string[]>();

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  for (const content of ["# Consumer lag\n\nKafka consumer lag on the billing cluster.", "# Rebalance\n\nKafka partition rebalance storms after a deploy."]) {
    const pushed = await ann.post("/v1/memories", { content });
    expect(pushed.status).toBe(201);
    const id: string = pushed.body.data.id;
    const [row] = await h.database.sql.query<{ lexemes: string[] }>(`SELECT tsvector_to_array(search_vector) AS lexemes FROM memories WHERE id = $1`, [id]);
    lexemes.set(id, row!.lexemes);
    if (content.includes("billing")) kafka = id;
    else rebalance = id;
  }
});

afterAll(async () => {
  await h.close();
});

describe("missing entities of candidate memories", () => {
  const missing = async (entities: string[][], filtered: boolean) => {
    const input: CandidatesInput = {
      userId: ann.id,
      vector: null,
      // No filter, the default depth and a scope too large for an exact scan: the static branch.
      scope: { hubIds: [ann.personalHubId], ...(filtered && { createdAfter: new Date(0) }) },
      k: 40,
      chunkCount: 100_000,
      chunkIds: [],
      memoryIds: [kafka, rebalance],
      entities: entities.map((l) => ({ lexemes: l })),
    };
    const { facts } = await loadCandidates(h.database.sql, input);
    return [facts.get(kafka)?.missingEntities, facts.get(rebalance)?.missingEntities];
  };

  it.each([false, true])("counts names a memory never mentions, half of a name's words being enough (filtered: %s)", async (filtered) => {
    const own = (id: string, word: string) => lexemes.get(id)!.find((lexeme) => lexeme.startsWith(word))!;
    const billing = own(kafka, "bill");
    const storm = own(rebalance, "storm");
    expect(lexemes.get(rebalance)).not.toContain(billing);
    expect(lexemes.get(kafka)).not.toContain(storm);
    expect(await missing([], filtered)).toEqual([0, 0]);
    expect(await missing([["kafka"]], filtered)).toEqual([0, 0]);
    expect(await missing([[billing]], filtered)).toEqual([0, 1]);
    expect(await missing([[billing], [storm]], filtered)).toEqual([1, 1]);
    // One of two words present is half: mentioned. One of three is not.
    expect(await missing([[billing, "zzyzx"]], filtered)).toEqual([0, 1]);
    expect(await missing([[billing, "zzyzx", "qqxq"]], filtered)).toEqual([1, 1]);
    // Lexemes are looked up literally, whatever characters they hold.
    expect(await missing([["o'brien\\x:y & !(z)"], ["kafka", "''"]], filtered)).toEqual([1, 1]);
  });
});
