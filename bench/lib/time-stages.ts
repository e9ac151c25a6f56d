import type { getEmbedder } from "@/lib/ai/embedder.ts";
import type { Database } from "@/lib/db/database.ts";

/**
 * BENCH_BREAKDOWN: times every raw SQL statement (by the function or table it names) and every
 * embedding call until print(), which restores both and prints the mean per recall of each stage.
 */
export function timeStages(database: Database, embedder: NonNullable<Awaited<ReturnType<typeof getEmbedder>>>) {
  const totals = new Map<string, number>();
  const add = (label: string, ms: number) => totals.set(label, (totals.get(label) ?? 0) + ms);
  const query = database.sql.query.bind(database.sql);
  const embed = embedder.embed.bind(embedder);
  database.sql.query = async (text, params) => {
    const started = performance.now();
    try {
      return await query(text, params);
    } finally {
      add(`sql: ${/(engram_\w+|FROM\s+\S+|UPDATE\s+\S+)/.exec(text)?.[1] ?? text.trim().slice(0, 40)}`, performance.now() - started);
    }
  };
  embedder.embed = async (texts, kind) => {
    const started = performance.now();
    try {
      return await embed(texts, kind);
    } finally {
      add("query embedding", performance.now() - started);
    }
  };
  return {
    print(count: number, server: { p50: number }) {
      database.sql.query = query;
      embedder.embed = embed;
      console.log(`  stages, mean ms per recall (server latency_ms p50 ${server.p50}):`);
      for (const [label, ms] of [...totals].sort((a, b) => b[1] - a[1])) console.log(`    ${(ms / count).toFixed(2).padStart(7)}  ${label}`);
    },
  };
}
