import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getEmbedder } from "@/lib/ai/embedder.ts";
import { loadRecalled } from "@/lib/recall/load-recalled.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { indexMemories } from "./recall-helpers.ts";

let h: Harness;
let ann: Client;
let edited: string;
let oldChunk: string;

const OLD = "# Vault access\n\nThe break-glass passphrase for the production vault is zanzibar-quokka-tapestry.";
const NEW = "# Vault access\n\nAsk the security team on call for production vault access; nobody keeps a passphrase.";
const OLD_SUMMARY = "The break-glass passphrase for the production vault is zanzibar-quokka-tapestry.";

beforeAll(async () => {
  expect(await getEmbedder(), "the local embedding model must be installed (npm run models)").not.toBeNull();
  h = await createHarness();
  ann = await h.user("Ann");
  const res = await ann.post("/v1/memories", { content: OLD });
  expect(res.status).toBe(201);
  edited = res.body.data.id;
  await indexMemories(h.db, [edited]);
  oldChunk = (await h.db.chunk.findFirstOrThrow({ where: { memoryId: edited }, select: { id: true } })).id;
  // As the summarise step writes it: the old version's summary names the passphrase too.
  await h.db.memory.update({ where: { id: edited }, data: { summary: OLD_SUMMARY } });
  // The edit takes the passphrase out; its new version waits for processing (not run here), so the
  // old version's chunks are still stored.
  const patched = await ann.patch(`/v1/memories/${edited}`, { content: NEW });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  expect(patched.body.data.processing_status).toBe("pending");
});

afterAll(async () => {
  await h?.close();
});

async function recalled(body: Record<string, unknown>) {
  const res = await ann.post("/v1/recall", body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.memories as { id: string; chunk_content: string; heading_chain: string }[];
}

describe("recall while an edit is being processed", () => {
  it("never shows or matches the old version's chunks, through either leg or path", async () => {
    const words = "zanzibar quokka tapestry";
    const asked = [
      // The in-process index, the SQL leg with a filter, the SQL leg unfiltered.
      { query: words },
      { query: words, created_after: "2000-01-01T00:00:00Z" },
      // The vector leg: a paraphrase sharing no rare word with the old text.
      { query: "what is the emergency break glass password of the production vault?" },
    ];
    for (const body of asked) {
      for (const memory of await recalled(body)) expect(memory.chunk_content, JSON.stringify(body)).not.toContain("zanzibar");
    }
    process.env.ENGRAM_LEXICAL_INDEX = "off";
    try {
      for (const memory of await recalled({ query: words })) expect(memory.chunk_content).not.toContain("zanzibar");
    } finally {
      delete process.env.ENGRAM_LEXICAL_INDEX;
    }
    // The removed words find nothing at all: the memory no longer holds them.
    expect(await recalled({ query: words })).toEqual([]);
    const search = await ann.get(`/v1/memories/search?q=${encodeURIComponent(words)}`);
    expect(search.status).toBe(200);
    expect(search.body.data).toEqual([]);
  });

  it("finds the new version by its own words meanwhile", async () => {
    const found = await recalled({ query: "security team on call vault access" });
    expect(found.map((m) => m.id)).toEqual([edited]);
    expect(found[0]!.chunk_content).toContain("security team");
  });

  it("shows no summary of the old version, in recall or GET, until the new one is summarised", async () => {
    const [found] = await recalled({ query: "security team on call vault access" });
    expect(found?.id).toBe(edited);
    expect(JSON.stringify(found)).not.toContain("zanzibar");
    const got = await ann.get(`/v1/memories/${edited}`);
    expect(got.status).toBe(200);
    expect(got.body.data.summary).toBe("");
    expect(JSON.stringify(got.body.data)).not.toContain("zanzibar");
  });

  it("a re-push of a source_path with new content drops the old summary the same way", async () => {
    const pushed = await ann.post("/v1/memories", { content: OLD, source_path: "notes/vault.md" });
    expect(pushed.status).toBe(201);
    const id: string = pushed.body.data.id;
    await indexMemories(h.db, [id]);
    await h.db.memory.update({ where: { id }, data: { summary: OLD_SUMMARY } });
    const again = await ann.post("/v1/memories", { content: `${NEW}\n\nSee notes/vault.md.`, source_path: "notes/vault.md" });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.data.id).toBe(id);
    expect(again.body.data.summary).toBe("");
    expect((await ann.get(`/v1/memories/${id}`)).body.data.summary).toBe("");
    const found = (await recalled({ query: "security team on call vault access" })).find((m) => m.id === id);
    expect(found).toBeDefined();
    expect(JSON.stringify(found)).not.toContain("zanzibar");
  });

  it("a link pushed again under its source_path is read again without its old page's summary", async () => {
    const link = { content: "https://vault.example.test/access", content_type: "link", source_path: "links/vault" };
    const pushed = await ann.post("/v1/memories", link);
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(201);
    const id: string = pushed.body.data.id;
    // As processing left it: the page read, summarised, done.
    await h.db.memory.update({ where: { id }, data: { state: "active", processingStatus: "done", extractedAt: new Date(), summary: OLD_SUMMARY } });
    const again = await ann.post("/v1/memories", { ...link, title: "Vault access page" });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.data.id).toBe(id);
    expect((await ann.get(`/v1/memories/${id}`)).body.data.summary).toBe("");
  });

  it("shows the new text when the edit lands between the search and the entries", async () => {
    // The search picked the old chunk a moment before the edit committed.
    const [entry] = await loadRecalled(h.database.sql, [{ memoryId: edited, chunkId: oldChunk, score: 0.9 }], {
      now: new Date(),
      withHub: false,
      userId: ann.id,
      hubIds: [ann.personalHubId],
    });
    expect(entry?.chunk_content).toBe(NEW);
    expect(entry?.heading_chain).toBe("");
  });

  it("lists related memories by the new text, not by the old version's vectors", async () => {
    const push = async (content: string) => {
      const res = await ann.post("/v1/memories", { content });
      expect(res.status).toBe(201);
      return res.body.data.id as string;
    };
    // A neighbour of the old text only (its own words, nothing of the new text), and one of the new text.
    const ofOld = await push("# Emergency credentials\n\nThe emergency break glass password of the prod secrets store is sealed in an envelope.");
    const ofNew = await push("# Security rota\n\nThe security team on call answers requests for access within the hour.");
    await indexMemories(h.db, [ofOld, ofNew]);
    const res = await ann.get(`/v1/memories/${edited}/related`);
    expect(res.status).toBe(200);
    const listed = res.body.data.map((entry: { memory: { id: string } }) => entry.memory.id);
    expect(listed).not.toContain(ofOld);
    expect(listed).toContain(ofNew);
    // Once the new version is processed, its own vectors are used again.
    await indexMemories(h.db, [edited]);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: edited } })).processingStatus).toBe("done");
    const after = (await ann.get(`/v1/memories/${edited}/related`)).body.data.map((entry: { memory: { id: string } }) => entry.memory.id);
    expect(after).toContain(ofNew);
  });
});
