import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { Db } from "@/lib/db/database.ts";
import { apiKeysLockKey } from "./create-api-key.ts";

/**
 * The first proof that someone holds an account's e-mail address (a Google sign-in that vouches for
 * it, an e-mail code) claims an account whose address was never proven: a password sign-up needs no
 * proof, so whoever made it may not be the address's owner. Everything that could let them back in
 * ends — the password, the API keys, the connected apps' grants and every session so far — and
 * the account is the prover's from now on. Its hubs and memories stay. A proven account is untouched.
 * The sign-in providers linked to it go too: whoever held the account could link their own GitHub
 * account to it (or made it by a GitHub sign-in GitHub had not verified the address of), and would
 * sign back in with it.
 */
export async function claimAccount(db: Db, userId: string, now: Date): Promise<boolean> {
  return db.$transaction(async (tx) => {
    const { count } = await tx.user.updateMany({
      where: { id: userId, emailUnverified: true },
      data: { emailUnverified: false, passwordHash: null, sessionsValidAfter: now, updatedAt: now },
    });
    if (count === 0) return false;
    // A key the old holder's credentials are making meanwhile is then among those revoked.
    await lockForTransaction(tx, apiKeysLockKey(userId));
    await tx.apiKey.updateMany({ where: { userId, revokedAt: null }, data: { revokedAt: now } });
    await tx.oAuthGrant.updateMany({ where: { userId, revokedAt: null }, data: { revokedAt: now } });
    await tx.oAuthAccount.deleteMany({ where: { userId } });
    return true;
  });
}
