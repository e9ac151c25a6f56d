import type { Database } from "@/lib/db/database.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";
import { pruneExpiredOAuthTokens } from "./prune-expired-tokens.ts";

/**
 * How long a client that no one has consented to is kept. Registration is open to anyone, so
 * without this every /oauth/register (up to 10 redirect URIs of 2,000 characters) would stay for
 * good. A real client registers right before its user's consent; one that got no grant in a day
 * registers again (MCP clients do on invalid_client). Metadata-document clients are only a cache
 * of their document and are fetched again when next named.
 */
export const UNUSED_CLIENT_RETENTION_MS = 24 * 60 * 60_000;
/** Rows deleted per statement: a prune never holds locks for long. */
const PRUNE_BATCH = 1000;
const PRUNE_EVERY_MS = 60 * 60_000;
/** The kinds anyone can add; the built-in CLI client is never pruned. */
const PRUNABLE_KINDS = ["registered", "metadata_document"];

/** Deletes clients older than the retention that never obtained a grant, in bounded batches. Returns rows deleted. */
export async function pruneUnusedOAuthClients(database: Database, now = new Date(), maxBatches = 20): Promise<number> {
  const cutoff = new Date(now.getTime() - UNUSED_CLIENT_RETENTION_MS);
  const where = { kind: { in: PRUNABLE_KINDS }, createdAt: { lt: cutoff }, grants: { none: {} } };
  return deleteInBatches(
    (take) => database.prisma.oAuthClient.findMany({ where, select: { id: true }, orderBy: { createdAt: "asc" }, take }),
    // The grant condition again, after the rows are locked: a consent still writing its grant holds
    // the client's row (its foreign key), and a DELETE that waited for it deleted the row without
    // looking again, cascading to the grant just committed. Locked first, the check runs afresh.
    // In id order, as every multi-row lock (lib/db/row-lock.ts): in the order the plan read them, two
    // prunes (two server processes) could each hold a row the other waits for.
    (ids) =>
      database.prisma.$transaction(async (tx) => {
        await tx.$executeRaw`SELECT 1 FROM oauth_clients WHERE id = ANY(${ids}::text[]) ORDER BY id FOR UPDATE`;
        return tx.oAuthClient.deleteMany({ where: { ...where, id: { in: ids } } });
      }),
    PRUNE_BATCH,
    maxBatches,
  );
}

/** Prunes never-used OAuth clients, and expired codes and refresh tokens, every hour for the life of the process. */
export function startUnusedOAuthClientsPrune(database: Database): void {
  runPeriodically("oauth: unused clients prune", PRUNE_EVERY_MS, () => pruneUnusedOAuthClients(database));
  runPeriodically("oauth: expired tokens prune", PRUNE_EVERY_MS, () => pruneExpiredOAuthTokens(database));
}
