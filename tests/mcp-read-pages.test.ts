import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { setDatabase } from "@/lib/db/database.ts";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { POST as chatgptPost } from "@/app/mcp/chatgpt/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { dispatch } from "./support/router.ts";

// engram_get (and fetch on /mcp/chatgpt) answered a memory's whole text, up to 3 MiB, twice: in the text
// item and again in structuredContent, a response of over 6 MiB for one read and far more than a model's
// context. The text now comes in pages of at most 100,000 characters, each result saying where the rest starts.
// Offsets and lengths count Unicode characters (code points), as the database's substring does: only the
// page is read from the database, not the whole text for every page.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

async function call(endpoint: "/mcp" | "/mcp/chatgpt", name: string, args: Record<string, unknown>) {
  const req = new Request(`http://engram.test${endpoint}`, {
    method: "POST",
    headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }),
  });
  const res = await (endpoint === "/mcp" ? mcpPost : chatgptPost)(req, { params: Promise.resolve({}) });
  const raw = await res.text();
  const result = (JSON.parse(raw) as any).result;
  return { size: raw.length, result, text: (result.content as { text: string }[]).map((c) => c.text).join("\n"), data: result.structuredContent };
}

const PAGE = 100_000;
const chars = (text: string) => [...text].length;

describe("reading a long memory", () => {
  // An emoji across the page boundary: a page never ends between the halves of a surrogate pair.
  const content = `# Survey\n\n${"a".repeat(PAGE - 11)}😀${"The reed beds were counted again. ".repeat(4_000)}end`;
  let id: string;

  beforeAll(async () => {
    const pushed = await ann.post("/v1/memories", { content });
    expect(pushed.status).toBe(201);
    id = pushed.body.data.id;
  });

  it("engram_get returns one page at a time, in its text and structured content alike, and says where the rest starts", async () => {
    const first = await call("/mcp", "engram_get", { id });
    expect(first.result.isError, first.text).toBeFalsy();
    expect(first.size).toBeLessThan(2 * PAGE + 10_000);
    const firstPage = first.data.memory.content as string;
    expect(chars(firstPage)).toBeLessThanOrEqual(PAGE);
    expect(first.data).toMatchObject({ content_offset: 0, content_length: chars(content), has_more: true, next_offset: chars(firstPage) });
    expect(first.text).toContain(firstPage);
    expect(first.text).toContain(`offset ${chars(firstPage)}`);

    let read = firstPage;
    let next: number | null = first.data.next_offset;
    for (let pages = 1; next !== null; pages++) {
      expect(pages).toBeLessThan(5);
      const page = await call("/mcp", "memax_get", { id, offset: next });
      expect(page.data.content_offset).toBe(next);
      read += page.data.memory.content;
      next = page.data.next_offset;
    }
    expect(read).toBe(content);
    // One read of the memory, however many pages it took: "most used" sorts and dreams read access_count.
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).accessCount).toBe(1);
  });

  it("fetch on /mcp/chatgpt pages the same way", async () => {
    const first = await call("/mcp/chatgpt", "fetch", { id });
    expect(first.size).toBeLessThan(2 * PAGE + 10_000);
    const doc = JSON.parse(first.text);
    expect(chars(doc.text)).toBeLessThanOrEqual(PAGE);
    expect(doc.metadata).toMatchObject({ content_offset: 0, content_length: chars(content), next_offset: chars(doc.text) });
    const second = JSON.parse((await call("/mcp/chatgpt", "fetch", { id, offset: doc.metadata.next_offset })).text);
    expect(content.startsWith(doc.text + second.text)).toBe(true);
  });

  it("reads only the page from the database, not the whole text for every page", async () => {
    // Every memory row a query returns, with the longest content it carried.
    let longest = 0;
    const db = h.database.prisma.$extends({
      query: {
        memory: {
          async $allOperations({ args, query }) {
            const found: unknown = await query(args);
            for (const row of [found].flat()) {
              const text = (row as { content?: unknown } | null)?.content;
              if (typeof text === "string") longest = Math.max(longest, text.length);
            }
            return found;
          },
        },
      },
    });
    setDatabase({ ...h.database, prisma: db as unknown as typeof h.database.prisma });
    try {
      const first = await call("/mcp", "engram_get", { id });
      const next = await call("/mcp", "engram_get", { id, offset: first.data.next_offset });
      const fetched = await call("/mcp/chatgpt", "fetch", { id, offset: first.data.next_offset });
      expect(next.data.memory.content).toBe(JSON.parse(fetched.text).text);
      expect(first.data.memory.content + next.data.memory.content).toBe(content.slice(0, (first.data.memory.content + next.data.memory.content).length));
    } finally {
      setDatabase(h.database);
    }
    expect(longest).toBeLessThanOrEqual(2 * PAGE);
    expect(longest).toBeLessThan(content.length);
  });

  it("pages count characters, so an emoji is one and never split, and an offset past the end reads nothing", async () => {
    const emoji = "😀".repeat(PAGE + 5);
    const pushed = await ann.post("/v1/memories", { content: emoji });
    expect(pushed.status).toBe(201);
    const first = await call("/mcp", "engram_get", { id: pushed.body.data.id });
    expect(first.data).toMatchObject({ content_offset: 0, content_length: PAGE + 5, has_more: true, next_offset: PAGE });
    expect(first.data.memory.content).toBe("😀".repeat(PAGE));
    const rest = await call("/mcp", "engram_get", { id: pushed.body.data.id, offset: PAGE });
    expect(rest.data).toMatchObject({ memory: { content: "😀".repeat(5) }, content_offset: PAGE, has_more: false, next_offset: null });
    const past = await call("/mcp", "engram_get", { id: pushed.body.data.id, offset: 10 * PAGE });
    expect(past.data).toMatchObject({ memory: { content: "" }, content_offset: PAGE + 5, has_more: false, next_offset: null });
  });

  it("a short memory is read whole, as before", async () => {
    const short = (await ann.post("/v1/memories", { content: "Short note." })).body.data.id;
    const got = await call("/mcp", "engram_get", { id: short });
    expect(got.data).toMatchObject({ memory: { content: "Short note." }, content_offset: 0, content_length: 11, has_more: false, next_offset: null });
    expect(got.text).not.toContain("offset");
  });
});

/**
 * The app's database with `then` run right after each read of a memory's row by a GET or engram_get
 * (a plain statement: `counted` when it counts the access), before the statement's rows are returned.
 */
function afterRowReads(then: (counted: boolean) => Promise<void>): typeof h.database {
  const sql = h.database.sql;
  return {
    ...h.database,
    sql: {
      ...sql,
      query: async <T,>(text: string, params?: unknown[]) => {
        const rows = await sql.query<T>(text, params);
        const counted = /^UPDATE memories m SET access_count/.test(text);
        if (counted || /FROM memories m WHERE m\.id = /.test(text)) await then(counted);
        return rows;
      },
    },
  };
}

// getMemoryPage read the row (title, version, content_hash) and then the page's substring in a second
// statement: an edit committing in between answered version N's details with version N+1's text, and
// content_length and next_offset measured the new text. The page now comes from the version the row
// read names, or the row is read again.
describe("a page read while the memory is edited", () => {
  it("answers the text of the version whose details it answers", async () => {
    const id = (await ann.post("/v1/memories", { content: "# Old plan\n\nShip on Friday." })).body.data.id;
    const edited = "# New plan\n\nShip on Tuesday, after the migration has run on staging for a day.";
    let edits = 0;
    // Observes the row's read and commits an edit right after it, before the page's own read.
    setDatabase(afterRowReads(async (counted) => {
      if (counted && edits === 0) {
        edits += 1;
        const patched = await ann.patch(`/v1/memories/${id}`, { content: edited });
        expect(patched.status).toBe(200);
      }
    }));
    let got: Awaited<ReturnType<typeof call>>;
    try {
      got = await call("/mcp", "engram_get", { id });
    } finally {
      setDatabase(h.database);
    }
    expect(edits).toBe(1);
    expect(got.result.isError, got.text).toBeFalsy();
    const stored = await h.db.memory.findUniqueOrThrow({ where: { id } });
    expect(stored.version).toBe(2);
    expect(got.data.memory).toMatchObject({ title: "New plan", version: 2, content_hash: stored.contentHash, content: edited });
    expect(got.data).toMatchObject({ content_offset: 0, content_length: chars(edited), has_more: false, next_offset: null });
    expect(got.text).toContain("# New plan");
  });

  it("gives up with conflict, not a loop, on a memory edited after every read of its row", async () => {
    const id = (await ann.post("/v1/memories", { content: "# Draft\n\nVersion 0." })).body.data.id;
    let edits = 0;
    let editing = false;
    setDatabase(afterRowReads(async () => {
      if (!editing && edits < 10) {
        editing = true;
        try {
          edits += 1;
          expect((await ann.patch(`/v1/memories/${id}`, { content: `# Draft\n\nVersion ${edits}.` })).status).toBe(200);
        } finally {
          editing = false;
        }
      }
    }));
    let got: Awaited<ReturnType<typeof call>>;
    try {
      got = await call("/mcp", "engram_get", { id });
    } finally {
      setDatabase(h.database);
    }
    expect(got.result.isError).toBe(true);
    expect(got.data.error.code).toBe("conflict");
    expect(edits).toBeLessThan(10);
  });
});

// A paged read took the memory's attachments in a statement of their own, after the pinned page: a new
// file replacing the memory's original between the two answered version N (its text and details) with
// version N+1's attachment. The attachments are read with the page, of the version the page is.
describe("a page read while the memory's file is replaced", () => {
  let blobDir: string;
  beforeAll(() => {
    blobDir = mkdtempSync(path.join(tmpdir(), "engram-blobs-"));
    setBlobStore(new LocalBlobStore(blobDir));
  });
  afterAll(() => {
    setBlobStore(undefined);
    rmSync(blobDir, { recursive: true, force: true });
  });

  async function uploaded(filename: string, text: string) {
    const bytes = Buffer.from(text);
    const intent = await ann.post("/v1/uploads", { filename, content_type: "text/plain", size_bytes: bytes.length, purpose: "memory_attachment" });
    expect(intent.status, intent.text).toBe(201);
    const put = await dispatch(new Request(intent.body.data.upload_url, { method: "PUT", headers: intent.body.data.headers, body: new Uint8Array(bytes) }));
    expect(put.status).toBe(200);
    return intent.body.data.file_ref as { object_key: string };
  }

  it("answers the attachments of the version whose text and details it answers", async () => {
    const first = await ann.post("/v1/memories", { content: "", file_ref: await uploaded("first.txt", "first version\n"), source_path: "notes/plan.txt" });
    expect(first.status, first.text).toBe(201);
    const id = first.body.data.id as string;
    const second = await uploaded("second.txt", "second version\n");
    let replaced = false;
    // Commits the new file right after the page's own statement, before anything the read does next.
    const db = h.database.prisma.$extends({
      query: {
        async $queryRaw({ args, query }) {
          const rows: unknown = await query(args);
          if (!replaced && /substring\(/.test(String((args as { strings?: string[] }).strings?.join("") ?? args))) {
            replaced = true;
            const pushed = await ann.post("/v1/memories", { content: "", file_ref: second, source_path: "notes/plan.txt" });
            expect(pushed.status, pushed.text).toBe(200);
          }
          return rows;
        },
      },
    });
    setDatabase({ ...h.database, prisma: db as unknown as typeof h.database.prisma });
    let got: Awaited<ReturnType<typeof call>>;
    try {
      got = await call("/mcp", "engram_get", { id, offset: 0 });
    } finally {
      setDatabase(h.database);
    }
    expect(replaced).toBe(true);
    expect(got.result.isError, got.text).toBeFalsy();
    const filenames = (got.data.memory.attachments as { filename: string }[]).map((a) => a.filename);
    expect({ version: got.data.memory.version, filenames }).toEqual({ version: 1, filenames: ["first.txt"] });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).version).toBe(2);
    // Read with the page, an attachment is the one REST's GET answers, field for field.
    const again = await call("/mcp", "engram_get", { id, offset: 0 });
    expect(again.data.memory.attachments).toEqual((await ann.get(`/v1/memories/${id}`)).body.data.attachments);
    expect(again.data.memory.attachments).toHaveLength(1);
  });
});
