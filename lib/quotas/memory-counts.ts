import type { SqlRunner } from "@/lib/db/database.ts";

/**
 * Memories per hub (scope "hub") or per owner (scope "user"), from the counters the memories triggers
 * keep in the same transaction as each write (migration 20261122165000_storage_usage). Counting the rows
 * instead reads every memory of the hub: 10–16 ms for a 2,000-memory hub on the embedded database, on
 * each hub list, `/v1/auth/me` and memory list.
 */
export async function memoryCounts(sql: SqlRunner, scope: "user" | "hub", ids: readonly string[]): Promise<Map<string, number>> {
  // A plain statement on the pool: every memory list and hub list reads it, and through Prisma's query
  // engine the same read cost about 0.4 ms of the server's CPU (PostgreSQL, 2026-11-28).
  const rows = ids.length
    ? await sql.query<{ scope_id: string; memories: number }>(
        `SELECT scope_id::text AS scope_id, memories FROM storage_usage WHERE scope = $1 AND scope_id = ANY($2::uuid[])`,
        [scope, [...ids]],
      )
    : [];
  const counts = new Map(ids.map((id) => [id, 0]));
  for (const row of rows) counts.set(row.scope_id, row.memories);
  return counts;
}
