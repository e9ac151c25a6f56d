import pg from "pg";

interface Statement {
  sql: string;
  params: unknown[];
}

/**
 * Lock order on PostgreSQL, shown without timing luck. A second connection takes `hold` (a row
 * lock) and keeps it, as a transaction stalled half-way would; `start` then begins the work under
 * test, and once that work waits for the held row, `check` (a NOWAIT lock) tells whether the work
 * left free what it must not take before that row. The held lock is released before this returns,
 * so the work can finish: await `started`.
 */
export async function stalledLock<T>(url: string, hold: Statement, start: () => T, check: Statement): Promise<{ started: T; free: boolean }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("BEGIN");
    await client.query(hold.sql, hold.params);
    const started = start();
    for (let waited = 0; ; waited += 20) {
      // Waiting for this connection's lock, not any lock on the server (other test databases wait too).
      // From pg_locks, read afresh each time: pg_stat_activity is a snapshot kept for the whole of this
      // transaction, which misses a connection the work opened after the first look.
      const { rows } = await client.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
      if (rows[0].n > 0) break;
      if (waited > 20_000) throw new Error("the work under test never waited for the held row");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const free = await client
      .query(check.sql, check.params)
      .then(() => true)
      .catch((error: { code?: string }) => (error.code === "55P03" ? false : Promise.reject(error)));
    return { started, free };
  } finally {
    await client.query("ROLLBACK").catch(() => {});
    await client.end();
  }
}
