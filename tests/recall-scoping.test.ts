import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AUTHOR_VERB_LIST, mentionsSomeone } from "@/lib/recall/analyze-query.ts";
import { lexicalSearch } from "@/lib/recall/lexical-search.ts";
import { loadCandidates } from "@/lib/recall/load-candidates.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { indexMemories } from "./recall-helpers.ts";

// Issue 18 (4): the SQL search functions never search unscoped, whatever their caller passes;
// and the author cue check and the author extraction share one verb list.

let h: Harness;
let ann: Client;
let mira: Client;
let eve: Client;
let teamHub: string;
let eveSecret: string;

const LEXICAL_ARGS = `$3::text, '{}'::text[], NULL, NULL, NULL, NULL, NULL, 32, 600, 6, 600, 500, 150, 50, 1.2, 0.75`;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  mira = await h.user("Mira");
  eve = await h.user("Eve");
  teamHub = await h.teamHub(ann, [[mira, "contributor"]]);
  const pushed = await mira.post("/v1/memories", { content: "# Deploy checklist\n\nRoll the api pods after the database migrations finish." }, { headers: { "x-hub-id": teamHub } });
  expect(pushed.status).toBe(201);
  const secret = await eve.post("/v1/memories", { content: "# Eve's private zebrafish notes\n\nThe zebrafish tank pump failed on Tuesday." });
  expect(secret.status).toBe(201);
  eveSecret = secret.body.data.id;
  await indexMemories(h.db, [pushed.body.data.id, eveSecret], { embed: false });
});

afterAll(async () => {
  await h.close();
});

describe("SQL search functions require the caller", () => {
  it("engram_lexical_search refuses a NULL user instead of trusting the hub ids", async () => {
    await expect(
      h.database.sql.query(`SELECT * FROM engram_lexical_search($1::uuid, $2::uuid[], ${LEXICAL_ARGS})`, [null, [eve.personalHubId], "zebrafish"]),
    ).rejects.toThrow(/p_user_id is required/);
  });

  it("engram_lexical_search searches only hubs the user belongs to, whatever hub ids are passed", async () => {
    const rows = await h.database.sql.query<{ hub_id: string | null; memory_id: string | null }>(
      `SELECT hub_id, memory_id FROM engram_lexical_search($1::uuid, $2::uuid[], ${LEXICAL_ARGS})`,
      [ann.id, [eve.personalHubId, teamHub], "zebrafish"],
    );
    expect(rows.filter((r) => r.hub_id).map((r) => r.hub_id)).toEqual([teamHub]);
    expect(rows.some((r) => r.memory_id === eveSecret)).toBe(false);
    const own = await lexicalSearch(h.database.sql, { userId: eve.id, text: "zebrafish" }, {}, 10);
    expect(own.hits.map((hit) => hit.memoryId)).toContain(eveSecret);
  });

  it("engram_recall_candidates refuses a NULL user and drops hubs the user is not in", async () => {
    await expect(
      h.database.sql.query(
        `SELECT * FROM engram_recall_candidates($1::uuid, NULL::vector, $2::uuid[], NULL, NULL, NULL, NULL, NULL, 40, true, '{}'::uuid[], $3::uuid[], '{}'::int[], '{}'::text[])`,
        [null, [eve.personalHubId], [eveSecret]],
      ),
    ).rejects.toThrow(/p_user_id is required/);
    const leaked = await loadCandidates(h.database.sql, {
      userId: ann.id,
      vector: null,
      scope: { hubIds: [eve.personalHubId] },
      k: 40,
      chunkCount: 1,
      chunkIds: [],
      memoryIds: [eveSecret],
      entities: [],
    });
    expect(leaked.facts.has(eveSecret)).toBe(false);
  });
});

describe("author cues: one verb list", () => {
  it.each(AUTHOR_VERB_LIST)("recall treats 'Mira %s' as an author cue", async (verb) => {
    expect(mentionsSomeone(`what Mira ${verb} about the deploy`)).toBe(true);
    const res = await ann.post("/v1/recall", { query: `what Mira ${verb} about the deploy` });
    expect(res.status).toBe(200);
    expect(res.body.data.query_metadata.filters.author).toEqual({ id: mira.id, name: "Mira" });
  });

  it("notices a possessive at the end of the query", () => {
    expect(mentionsSomeone("the deploy checklist is Mira's")).toBe(true);
    expect(mentionsSomeone("how do we roll the api pods")).toBe(false);
  });
});
