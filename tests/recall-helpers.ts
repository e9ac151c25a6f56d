import { getEmbedder } from "@/lib/ai/embedder.ts";
import { hanGlossWords } from "@/lib/ai/gloss-han.ts";
import type { Db } from "@/lib/db/database.ts";
import { replaceChunks, type ChunkInput } from "@/lib/recall/store-chunks.ts";

/**
 * Indexes memories the way background processing does (markdown sections →
 * chunks of ≤ ~1200 characters, real local embeddings of heading + text, the
 * English glosses of Chinese words), so
 * recall tests and the eval do not wait for the background runner.
 */
export async function indexMemories(db: Db, memoryIds: string[], options: { embed?: boolean } = {}): Promise<void> {
  const embedder = options.embed === false ? null : await getEmbedder();
  const memories = await db.memory.findMany({ where: { id: { in: memoryIds } } });
  for (const memory of memories) {
    const drafts = splitMarkdown(memory.content);
    const texts = drafts.map((d) => (d.headingChain ? `${d.headingChain}\n${d.content}` : d.content));
    const vectors = embedder ? await embedder.embed(texts, "document") : null;
    const glosses = await Promise.all(texts.map(hanGlossWords));
    const chunks: ChunkInput[] = drafts.map((d, i) => ({ ...d, position: i, tokenCount: Math.ceil(d.content.length / 4), embedding: vectors?.[i] ?? null, gloss: glosses[i]! }));
    await db.$transaction(async (tx) => {
      await replaceChunks(tx, memory, chunks);
      await tx.memory.update({ where: { id: memory.id }, data: { processingStatus: "done", processedAt: new Date() } });
    });
  }
}

function splitMarkdown(content: string): { content: string; headingChain: string }[] {
  const out: { content: string; headingChain: string }[] = [];
  const chain: string[] = [];
  let buffer: string[] = [];
  const flush = () => {
    const text = buffer.join("\n").trim();
    buffer = [];
    if (!text) return;
    const paragraphs = text.split(/\n{2,}/);
    let current = "";
    for (const paragraph of paragraphs) {
      if (current && current.length + paragraph.length > 1200) {
        out.push({ content: current, headingChain: chain.join(" > ") });
        current = "";
      }
      current = current ? `${current}\n\n${paragraph}` : paragraph;
    }
    if (current) out.push({ content: current, headingChain: chain.join(" > ") });
  };
  for (const line of content.split("\n")) {
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      chain.length = heading[1]!.length - 1;
      chain[heading[1]!.length - 1] = heading[2]!.trim();
      for (let i = 0; i < chain.length; i++) chain[i] ??= "";
      continue;
    }
    buffer.push(line);
  }
  flush();
  if (out.length === 0) out.push({ content: content.trim() || content, headingChain: chain.filter(Boolean).join(" > ") });
  return out.map((c) => ({ ...c, headingChain: c.headingChain.split(" > ").filter(Boolean).join(" > ") }));
}
