/**
 * BEIR SciFact (5,183 abstracts, 300 test claims; ../shared/datasets/scifact) as an eval corpus.
 * Its odd query ids are where the fusion weight, the calibration and the floor's gap were fitted
 * (lib/recall/relevance-score.ts); the even ids are held out.
 *
 * The fast path still goes through the real storage and recall code: memories are inserted in
 * bulk, chunked by the real chunker, embedded in batches by the real embedder (cached on disk,
 * eval/embedding-cache.ts) and stored by replaceChunks (the only chunk writer, with its analyser
 * and BM25 statistics triggers); queries go through POST /v1/recall. Only the background job
 * runner and the heuristic summaries are skipped.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { Embedder } from "@/lib/ai/embedder.ts";
import { hanGlossWords } from "@/lib/ai/gloss-han.ts";
import type { Database } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";
import { chunkContent } from "@/lib/processing/chunk-content.ts";
import { embeddingText } from "@/lib/processing/processing-steps.ts";
import { replaceChunks } from "@/lib/recall/store-chunks.ts";
import { embedCached } from "./embedding-cache.ts";

export interface BulkDoc {
  key: string;
  title: string;
  content: string;
}

export interface GradedQuery {
  id: string;
  text: string;
  relevant: Record<string, number>;
}

export function scifactDir(): string | undefined {
  const candidates = [process.env.ENGRAM_SCIFACT_DIR, path.resolve(process.cwd(), "../shared/datasets/scifact"), "/work/shared/datasets/scifact"];
  return candidates.find((dir): dir is string => Boolean(dir && existsSync(path.join(dir, "corpus.jsonl"))));
}

export function loadScifact(dir: string): { docs: BulkDoc[]; queries: GradedQuery[] } {
  const lines = (file: string) => readFileSync(path.join(dir, file), "utf8").split("\n").filter(Boolean);
  const docs = lines("corpus.jsonl").map((line) => {
    const doc = JSON.parse(line) as { _id: string; title: string; text: string };
    return { key: doc._id, title: doc.title, content: `# ${doc.title}\n\n${doc.text}` };
  });
  const texts = new Map(lines("queries.jsonl").map((line) => {
    const query = JSON.parse(line) as { _id: string; text: string };
    return [query._id, query.text] as const;
  }));
  const relevant = new Map<string, Record<string, number>>();
  for (const line of lines("qrels_test.tsv").slice(1)) {
    const [queryId, docId, score] = line.split("\t");
    if (!queryId || !docId || Number(score) <= 0) continue;
    relevant.set(queryId, { ...relevant.get(queryId), [docId]: Number(score) });
  }
  const queries = [...relevant].map(([id, grades]) => ({ id, text: texts.get(id)!, relevant: grades }));
  return { docs, queries };
}

/** Inserts the documents as memories of one hub and indexes them; returns memory id → doc key. */
export async function bulkIndex(
  database: Database,
  embedder: Embedder | null,
  owner: { userId: string; hubId: string },
  name: string,
  docs: BulkDoc[],
): Promise<Map<string, string>> {
  const keyById = new Map<string, string>();
  const rows = docs.map((doc) => {
    const id = newId();
    keyById.set(id, doc.key);
    return {
      id,
      hubId: owner.hubId,
      ownerId: owner.userId,
      title: doc.title.slice(0, 300),
      content: doc.content,
      contentType: "markdown",
      contentHash: createHash("sha256").update(doc.content).digest("hex"),
      kind: "semantic",
      stability: "stable",
      state: "active",
      source: "import",
      processingStatus: "done",
      processedAt: new Date(),
    };
  });
  for (let i = 0; i < rows.length; i += 500) await database.prisma.memory.createMany({ data: rows.slice(i, i + 500) });

  const chunked = rows.map((row) => chunkContent(row.content, row.contentType));
  const texts = chunked.flat().map(embeddingText);
  const started = Date.now();
  let lastReport = 0;
  const vectors = embedder
    ? await embedCached(embedder, name, texts, (done, total) => {
        if (Date.now() - lastReport < 15_000 && done < total) return;
        lastReport = Date.now();
        console.log(`  ${name}: embedded ${done}/${total} new chunks (${((Date.now() - started) / 1000).toFixed(0)} s)`);
      })
    : null;
  let next = 0;
  for (let i = 0; i < rows.length; i++) {
    const chunks = await Promise.all(
      chunked[i]!.map(async (chunk, j) => ({ ...chunk, embedding: vectors?.[next + j] ?? null, gloss: await hanGlossWords(embeddingText(chunk)) })),
    );
    next += chunks.length;
    await database.prisma.$transaction((tx) => replaceChunks(tx, { id: rows[i]!.id, hubId: owner.hubId }, chunks));
  }
  return keyById;
}
