// npm run bench:ingest -- --files — upload→processed latency for a 20-page PDF through the real
// route handlers: POST /v1/uploads, the signed PUT to the embedded blob store (streamed to disk),
// POST /v1/memories with the file_ref, then extraction, chunking, embedding and summaries in the
// embedded runner. Fresh on-disk embedded database and blob directory; never part of npm test.
//
//   BENCH_FILE_COUNT   PDFs uploaded one at a time, each waited for (default 20)
//   BENCH_FILE_PAGES   pages per PDF (default 20), ~250 words each
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { PDFDocument, StandardFonts } from "pdf-lib";
import { PUT as blobPutRoute } from "@/app/v1/blobs/[...key]/route.ts";
import { POST as createMemoryRoute } from "@/app/v1/memories/route.ts";
import { POST as createUploadRoute } from "@/app/v1/uploads/route.ts";
import { getEmbedder } from "@/lib/ai/embedder.ts";
import { setRateLimiter, MemoryRateLimiter } from "@/lib/api/rate-limit.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { openDatabase, setDatabase } from "@/lib/db/database.ts";
import { backgroundRunner, startBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { markdownMemory } from "./ingest-corpus.ts";

const COUNT = Number(process.env.BENCH_FILE_COUNT ?? 20);
const PAGES = Number(process.env.BENCH_FILE_PAGES ?? 20);

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
const stats = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { count: sorted.length, p50: percentile(sorted, 50), p95: percentile(sorted, 95), max: sorted.at(-1) ?? NaN };
};

/** A PDF of `pages` pages of wrapped prose (different text per document). */
async function makePdf(seed: number, pages: number): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let p = 0; p < pages; p++) {
    const page = doc.addPage([595, 842]);
    const words = markdownMemory(seed * 1000 + p, 1600).replace(/[#*`>-]/g, " ").split(/\s+/).filter(Boolean);
    let line = "";
    let y = 800;
    for (const word of words) {
      if ((line + " " + word).length > 90) {
        page.drawText(line, { x: 40, y, size: 10, font });
        y -= 13;
        line = word;
        if (y < 40) break;
      } else line = line ? `${line} ${word}` : word;
    }
    if (line && y >= 40) page.drawText(line, { x: 40, y, size: 10, font });
  }
  return Buffer.from(await doc.save());
}

const dataDir = mkdtempSync(path.join(tmpdir(), "engram-bench-files-"));
const database = await openDatabase({ dataDir: path.join(dataDir, "pglite") });
setDatabase(database);
setBlobStore(new LocalBlobStore(path.join(dataDir, "blobs")));
setRateLimiter(new MemoryRateLimiter({ regular: 1e9, heavy: 1e9, light: 1e9 }));
const now = new Date();
const { extra } = await createUser(database.prisma, { email: "bench@example.test", name: "Bench" }, now, (tx, created) =>
  insertApiKey(tx, created.user.id, "bench", now),
);
if (!(await getEmbedder())) throw new Error("No embedding model: run `npm run models` first");
await startBackgroundProcessing();
const runner = backgroundRunner();
if (!runner) throw new Error("the embedded runner did not start (is ENGRAM_PROCESSING=off or Inngest configured?)");

const auth = { authorization: `Bearer ${extra.key}`, "content-type": "application/json" };
const noParams = { params: Promise.resolve({}) };

async function json(res: Response, status: number) {
  if (res.status !== status) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { data: Record<string, unknown> }).data;
}

async function uploadAndCreate(pdf: Buffer, i: number): Promise<{ id: string; startedAt: number; putMs: number }> {
  const startedAt = Date.now();
  const intent = await json(
    await createUploadRoute(
      new Request("http://bench.local/v1/uploads", {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ filename: `report-${i}.pdf`, content_type: "application/pdf", size_bytes: pdf.length, purpose: "memory_attachment" }),
      }),
      noParams,
    ),
    201,
  );
  const url = new URL(intent.upload_url as string);
  const key = url.pathname.replace(/^\/v1\/blobs\//, "").split("/");
  const t0 = performance.now();
  await json(
    await blobPutRoute(new Request(url, { method: "PUT", headers: intent.headers as Record<string, string>, body: new Uint8Array(pdf) }), {
      params: Promise.resolve({ key }),
    } as never),
    200,
  );
  const putMs = performance.now() - t0;
  const sha256 = createHash("sha256").update(pdf).digest("hex");
  const memory = await json(
    await createMemoryRoute(
      new Request("http://bench.local/v1/memories", { method: "POST", headers: auth, body: JSON.stringify({ file_ref: { ...(intent.file_ref as object), sha256 } }) }),
      noParams,
    ),
    201,
  );
  return { id: memory.id as string, startedAt, putMs };
}

async function waitProcessed(id: string): Promise<{ at: number; error: string | null; chunks: number }> {
  for (;;) {
    const row = await database.prisma.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, processedAt: true, processingError: true, state: true } });
    if (row.processingStatus === "failed") throw new Error(`memory ${id} failed: ${row.processingError}`);
    if (row.processingStatus === "done") {
      const chunks = await database.prisma.chunk.count({ where: { memoryId: id } });
      return { at: row.processedAt!.getTime(), error: row.processingError, chunks };
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

console.log(`bench:ingest --files — ${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}, ${PAGES}-page PDFs`);
const latencies: number[] = [];
const puts: number[] = [];
let chunks = 0;
let bytes = 0;
const started = Date.now();
for (let i = 0; i < COUNT; i++) {
  const pdf = await makePdf(i, PAGES);
  bytes = pdf.length;
  const created = await uploadAndCreate(pdf, i);
  const done = await waitProcessed(created.id);
  if (done.error) throw new Error(`memory ${created.id}: ${done.error}`);
  latencies.push(done.at - created.startedAt);
  puts.push(created.putMs);
  chunks = done.chunks;
}
const elapsed = (Date.now() - started) / 1000;
const latency = stats(latencies);
console.log(`pdf ${bytes} bytes, ${chunks} chunks each | PUT p50=${stats(puts).p50.toFixed(1)} ms`);
console.log(`upload→processed p50=${latency.p50} ms p95=${latency.p95} ms max=${latency.max} ms (n=${latency.count}) | ${(COUNT / elapsed).toFixed(2)} files/s sequential`);
const resultsDir = path.join(import.meta.dirname, "results");
mkdirSync(resultsDir, { recursive: true });
writeFileSync(
  path.join(resultsDir, `ingest-files-${Date.now()}.json`),
  JSON.stringify({ at: new Date().toISOString(), cores: cpus().length, loadavg: loadavg(), pages: PAGES, pdfBytes: bytes, chunks, latency, putP50: stats(puts).p50 }, null, 2),
);
runner.stop();
await database.close();
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
