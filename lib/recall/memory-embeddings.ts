import type { SqlRunner } from "@/lib/db/database.ts";

/**
 * One unit vector per embedded memory of a hub (the mean of its chunks'
 * embeddings), for the dream's similarity passes. Active memories only, and
 * not those whose edit is pending or running: their chunks are still those of
 * the old text (recall and related memories leave them out too).
 */
export async function memoryEmbeddings(sql: SqlRunner, hubId: string): Promise<Map<string, Float32Array>> {
  const rows = await sql.query<{ memory_id: string; v: string }>(
    `SELECT c.memory_id, avg(c.embedding)::text AS v
       FROM chunks c JOIN memories m ON m.id = c.memory_id
      WHERE c.hub_id = $1::uuid AND m.state = 'active' AND m.processing_status NOT IN ('pending', 'running') AND c.embedding IS NOT NULL
      GROUP BY c.memory_id`,
    [hubId],
  );
  const out = new Map<string, Float32Array>();
  for (const row of rows) {
    const parts = row.v.slice(1, -1).split(",");
    const vector = new Float32Array(parts.length);
    let norm = 0;
    for (let i = 0; i < parts.length; i++) {
      const x = Number(parts[i]);
      vector[i] = x;
      norm += x * x;
    }
    norm = Math.sqrt(norm) || 1;
    for (let i = 0; i < vector.length; i++) vector[i] = vector[i]! / norm;
    out.set(row.memory_id, vector);
  }
  return out;
}
