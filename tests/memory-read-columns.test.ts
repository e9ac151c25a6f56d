import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { serializeAttachment, serializeMemory } from "@/lib/memories/serialize-memory.ts";
import { newId } from "@/lib/ids.ts";
import { call, createHarness, type Client, type Harness } from "./support/harness.ts";

// The memory list and a memory's GET read only the columns their answers show (issue 16: Prisma's
// CPU grows with every column of every row it maps), and still answer every field as the whole row
// serialised gives it.

let h: Harness;
let ann: Client;
let team: string;
let ids: string[];

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  const bob = await h.user("Bob");
  team = await h.teamHub(bob, [[ann, "contributor"]]);
  ids = [];
  for (let i = 0; i < 3; i++) ids.push((await ann.post("/v1/memories", { content: `Personal note ${i}.`, tags: ["a", `t${i}`], project_context: { repo: "engram" } })).body.data.id);
  for (let i = 0; i < 2; i++) ids.push((await ann.post("/v1/memories", { content: `Team note ${i}.`, source_path: `notes/${i}.md` }, { headers: { "x-hub-id": team } })).body.data.id);
  await h.db.attachment.create({
    data: { id: newId(), memoryId: ids[0]!, hubId: ann.personalHubId, objectKey: `test/${ids[0]}`, filename: "a.png", contentType: "image/png", sizeBytes: 3, sha256: "ab", width: 1, height: 2 },
  });
});
afterAll(() => h.close());

const whole = async (id: string) => serializeMemory(await h.db.memory.findUniqueOrThrow({ where: { id } }));
/** The columns of Prisma's memory reads made while `run` runs (the spies call through). */
async function memoryReads(run: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const spies = (["findMany", "findFirst", "updateManyAndReturn"] as const).map((method) => vi.spyOn(h.db.memory, method));
  try {
    await run();
    return spies.flatMap((spy) => spy.mock.calls.map((call) => (call[0] as { select?: Record<string, unknown> }).select ?? { "(every column)": true }));
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

/** The arguments of every memory.create made in a transaction while `run` runs (the spies call through). */
async function createsInTransactions(run: () => Promise<unknown>): Promise<{ omit?: Record<string, boolean> }[]> {
  const calls: { omit?: Record<string, boolean> }[] = [];
  const transaction = h.db.$transaction.bind(h.db) as (fn: (tx: unknown) => Promise<unknown>, options?: unknown) => Promise<unknown>;
  const spy = vi.spyOn(h.db, "$transaction").mockImplementation(((fn: unknown, options?: unknown) =>
    typeof fn !== "function"
      ? transaction(fn as never, options)
      : transaction(async (tx) => {
          const create = (tx as typeof h.db).memory.create.bind((tx as typeof h.db).memory);
          vi.spyOn((tx as typeof h.db).memory, "create").mockImplementation(((args: { omit?: Record<string, boolean> }) => {
            calls.push(args);
            return create(args as never);
          }) as never);
          return (fn as (tx: unknown) => Promise<unknown>)(tx);
        }, options)) as never);
  try {
    await run();
    return calls;
  } finally {
    spy.mockRestore();
  }
}

describe("memory reads", () => {
  test("a list page, of one hub or across hubs, answers every field as the stored row gives it", async () => {
    // Every nullable field set on one of them, the times included.
    await h.db.memory.update({
      where: { id: ids[2] },
      data: { processedAt: new Date("2026-01-02T03:04:05.678Z"), processingError: "none", hint: "h", hubReason: "r", sourceAgent: "a", assistedByAgent: "b", initiationType: "user", projectContext: { repo: "x", n: 1 } },
    });
    expect((await ann.get(`/v1/memories/${ids[2]}`)).status).toBe(200);
    for (const path of ["/v1/memories?limit=10", `/v1/memories?hub_id=${team}`, `/v1/memories?hub_id=${ann.personalHubId}&sort=relevant`]) {
      const res = await ann.get(path);
      expect(res.status).toBe(200);
      expect(res.body.data.memories.length).toBeGreaterThan(0);
      for (const memory of res.body.data.memories) expect(memory).toEqual(await whole(memory.id));
    }
  });

  test("a GET answers every field, the content and the attachments as the stored rows give them", async () => {
    const res = await ann.get(`/v1/memories/${ids[0]}`);
    expect(res.status).toBe(200);
    const row = await h.db.memory.findUniqueOrThrow({ where: { id: ids[0] }, include: { attachments: true } });
    expect(res.body.data).toEqual({ ...serializeMemory(row), content: row.content, attachments: row.attachments.map((a) => serializeAttachment(a, row.ownerId)) });
    expect(res.body.data.attachments).toHaveLength(1);
    expect(res.body.data.access_count).toBe(1);
  });

  test("a GET reads its attachments in a plain statement, not through Prisma", async () => {
    const spy = vi.spyOn(h.db.attachment, "findMany");
    try {
      for (const id of [ids[0], ids[3]]) expect((await ann.get(`/v1/memories/${id}`)).status).toBe(200);
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });

  test("a push does not read back the content it just sent, and answers and stores it as sent", async () => {
    const content = `# Long note\n\n${"Run the migrations before the web tier. ".repeat(5000)}🦊 done`;
    let res: Awaited<ReturnType<Client["post"]>> | undefined;
    const creates = await createsInTransactions(async () => {
      res = await ann.post("/v1/memories", { content, tags: ["long"] });
    });
    expect(res!.status).toBe(201);
    expect(creates).toHaveLength(1);
    expect(creates[0]!.omit).toEqual({ content: true });
    const row = await h.db.memory.findUniqueOrThrow({ where: { id: res!.body.data.id } });
    expect(row.content).toBe(content);
    expect(res!.body.data).toEqual(serializeMemory(row));
    expect((await ann.get(`/v1/memories/${row.id}`)).body.data.content).toBe(content);
  });

  test("a GET (or HEAD) reads its memory in a plain statement, not through Prisma, counting the access only on GET", async () => {
    const before = (await h.db.memory.findUniqueOrThrow({ where: { id: ids[1] } })).accessCount;
    expect(await memoryReads(async () => expect((await ann.get(`/v1/memories/${ids[1]}`)).status).toBe(200))).toEqual([]);
    expect(await memoryReads(async () => expect((await call("HEAD", `/v1/memories/${ids[1]}`, undefined, { headers: { authorization: `Bearer ${ann.key}` } })).status).toBe(200))).toEqual([]);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: ids[1] } })).accessCount).toBe(before + 1);
  });

  test("a GET of a memory out of reach is not found and counts nothing", async () => {
    const cy = await h.user("Cy");
    const teamMemory = ids[3]!;
    const before = (await h.db.memory.findUniqueOrThrow({ where: { id: teamMemory } })).accessCount;
    expect((await cy.get(`/v1/memories/${teamMemory}`)).status).toBe(404);
    // Ann's key limited to her personal hub does not reach the team hub she belongs to.
    const limited = await h.db.apiKey.findFirstOrThrow({ where: { userId: ann.id } });
    await h.db.apiKey.update({ where: { id: limited.id }, data: { hubScopeMode: "hub_allowlist", hubIds: [ann.personalHubId] } });
    try {
      expect((await ann.get(`/v1/memories/${teamMemory}`)).status).toBe(404);
      expect((await ann.get(`/v1/memories/${ids[1]}`)).status).toBe(200);
    } finally {
      await h.db.apiKey.update({ where: { id: limited.id }, data: { hubScopeMode: limited.hubScopeMode, hubIds: limited.hubIds } });
    }
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: teamMemory } })).accessCount).toBe(before);
  });

  test("a list page, of one hub or across hubs, is read in plain statements, not through Prisma", async () => {
    for (const path of ["/v1/memories?limit=10", `/v1/memories?hub_id=${team}`, `/v1/memories?hub_id=${ann.personalHubId}&sort=relevant&limit=1`]) {
      const reads = await memoryReads(async () => expect((await ann.get(path)).status).toBe(200));
      expect(reads).toEqual([]);
    }
  });

  test("a list page's filters and cursor hold in the one-hub statement as in the walks across hubs", async () => {
    for (const sort of ["newest", "relevant"]) {
      const seen: string[] = [];
      let cursor = "";
      do {
        const res = await ann.get(`/v1/memories?hub_id=${ann.personalHubId}&sort=${sort}&limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
        expect(res.status).toBe(200);
        seen.push(...res.body.data.memories.map((m: { id: string }) => m.id));
        cursor = res.body.data.next_cursor;
      } while (cursor);
      const all = (await ann.get(`/v1/memories?sort=${sort}&limit=50`)).body.data.memories.filter((m: { hub_id: string }) => m.hub_id === ann.personalHubId);
      expect(seen).toEqual(all.map((m: { id: string }) => m.id));
    }
    const kinds = (await ann.get(`/v1/memories?hub_id=${team}&kind=semantic&created_after=2000-01-01T00:00:00Z&created_before=2999-01-01T00:00:00Z`)).body.data;
    const stored = await h.db.memory.findMany({ where: { hubId: team, kind: "semantic" }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] });
    expect(kinds.memories.map((m: { id: string }) => m.id)).toEqual(stored.map((m) => m.id));
    expect((await ann.get(`/v1/memories?hub_id=${team}&created_before=2000-01-01T00:00:00Z`)).body.data.memories).toEqual([]);
  });
});
