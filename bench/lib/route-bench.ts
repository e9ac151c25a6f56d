import { PostgresRateLimiter } from "@/lib/api/postgres-rate-limit.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { setDatabase, type Database } from "@/lib/db/database.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { flushUsage } from "@/lib/usage/count-usage.ts";
import { freshDatabase } from "./fresh-database.ts";

/**
 * The setup the in-process route benchmarks share: a fresh database (freshDatabase), the rate limiter
 * the server uses on it with caps no run reaches, and one user with an API key. `request` builds a
 * request as that user; `close` writes what the requests batched (access and usage counts) before the
 * pool closes, and drops the database.
 */
export async function routeBench(prefix: string): Promise<{
  database: Database;
  label: string;
  request: (method: string, path: string, body?: unknown) => Request;
  close: () => Promise<void>;
}> {
  const { database, label, drop } = await freshDatabase({ prefix });
  const close = async () => {
    await flushAccess();
    await flushUsage();
    await database.close();
    await drop();
  };
  try {
    setDatabase(database);
    const caps = { regular: 1e9, heavy: 1e9, light: 1e9 };
    setRateLimiter(database.kind === "postgres" ? new PostgresRateLimiter(caps, async () => database.sql) : new MemoryRateLimiter(caps));
    const now = new Date();
    const { extra } = await createUser(database.prisma, { email: `${prefix}@example.test`, name: prefix }, now, (tx, created) => insertApiKey(tx, created.user.id, "bench", now));
    const request = (method: string, path: string, body?: unknown) =>
      new Request(`http://bench.test${path}`, {
        method,
        headers: { authorization: `Bearer ${extra.key}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    return { database, label, request, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** A route's JSON answer; anything but a success stops the benchmark with what the route said. */
export async function okJson(res: Response, what: string): Promise<{ data: { id: string } }> {
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${what}: ${res.status} ${text}`);
  return JSON.parse(text) as { data: { id: string } };
}
