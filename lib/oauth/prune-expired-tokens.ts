import type { Database } from "@/lib/db/database.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { CODE_TTL_MS } from "./approve-consent.ts";
import { listedGrant } from "./list-grants.ts";

/**
 * How long a code or refresh token is kept past its expiry. Every refresh adds a row (hourly for
 * a connected MCP client) and every sign-in a code, and nothing else ever deletes them while the
 * grant lives. Past expiry they are refused anyway; the day's margin keeps a late replay of a used
 * one answered as a replay (revoking the grant) rather than as unknown.
 */
export const EXPIRED_TOKEN_RETENTION_MS = 24 * 60 * 60_000;
const PRUNE_BATCH = 1000;

/**
 * Deletes codes and refresh tokens expired over a day ago, the grants left with neither (a consent
 * whose code was never exchanged, or a grant idle past its last refresh token), and denied consent
 * forms past their life, in bounded batches. Returns rows deleted.
 */
export async function pruneExpiredOAuthTokens(database: Database, now = new Date(), maxBatches = 20): Promise<number> {
  const where = { expiresAt: { lt: new Date(now.getTime() - EXPIRED_TOKEN_RETENTION_MS) } };
  const prisma = database.prisma;
  const codes = await deleteInBatches(
    async (take) => (await prisma.oAuthCode.findMany({ where, select: { codeHash: true }, take })).map((row) => ({ id: row.codeHash })),
    (ids) => prisma.oAuthCode.deleteMany({ where: { codeHash: { in: ids } } }),
    PRUNE_BATCH,
    maxBatches,
  );
  const tokens = await deleteInBatches(
    async (take) => (await prisma.oAuthRefreshToken.findMany({ where, select: { tokenHash: true }, take })).map((row) => ({ id: row.tokenHash })),
    (ids) => prisma.oAuthRefreshToken.deleteMany({ where: { tokenHash: { in: ids } } }),
    PRUNE_BATCH,
    maxBatches,
  );
  // Grants after their codes and tokens: what those deletions left tokenless goes in this run.
  // Past its code's lifetime and the retention, a grant with no refresh token can never get one.
  const grantWhere = { createdAt: { lt: new Date(now.getTime() - CODE_TTL_MS - EXPIRED_TOKEN_RETENTION_MS) }, NOT: listedGrant(now) };
  const grants = await deleteInBatches(
    (take) => prisma.oAuthGrant.findMany({ where: grantWhere, select: { id: true }, take }),
    // The condition again: a refresh token written since the read keeps its grant.
    (ids) => prisma.oAuthGrant.deleteMany({ where: { ...grantWhere, id: { in: ids } } }),
    PRUNE_BATCH,
    maxBatches,
  );
  // A denied form's token is refused once its 15 minutes are over: its row says nothing after.
  const deniedWhere = { expiresAt: { lt: now } };
  const denied = await deleteInBatches(
    async (take) => (await prisma.oAuthDeniedConsent.findMany({ where: deniedWhere, select: { consentTokenHash: true }, take })).map((row) => ({ id: row.consentTokenHash })),
    (ids) => prisma.oAuthDeniedConsent.deleteMany({ where: { ...deniedWhere, consentTokenHash: { in: ids } } }),
    PRUNE_BATCH,
    maxBatches,
  );
  return codes + tokens + grants + denied;
}
