import { randomBytes } from "node:crypto";
import { FULL_ACCESS, type AuthUser, type Credential } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { retryAfterSeconds } from "@/lib/api/retry-after-seconds.ts";
import { apiKeysLockKey } from "@/lib/auth/create-api-key.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { sessionStillValid } from "@/lib/auth/session.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import type { Db, DbClient } from "@/lib/db/database.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { newId, normalizeId } from "@/lib/ids.ts";
import type { AuthorizeRequest } from "./authorize-request.ts";
import { CONSENT_TTL_MS } from "./consent-token.ts";

/** The consent page acts through the dashboard session: everything the user can. */
const FULL_ACCESS_CREDENTIAL: Credential = { type: "session", ...FULL_ACCESS };

export const CODE_TTL_MS = 5 * 60 * 1000;
export const CODE_PREFIX = "eac_";
/**
 * Live grants one user may hold for one app. Every sign-in of a client is a new consent, and a client
 * that lost its tokens (reinstalled, a new machine) signs in again while its old grant's refresh
 * token still works for 30 days: without a cap, grants (and live credentials no client holds any
 * more) piled up without end. Past it, the least recently used goes, as GitHub does per app.
 */
export const MAX_GRANTS_PER_CLIENT = 10;

export interface Consent {
  /** null = every hub, including ones joined later. */
  hubIds: string[] | null;
  write: boolean;
}

/**
 * The user allowed the client: a grant with what they picked, and a single-use code for it. Given
 * through a dashboard `session`, the grant is made only if that session still counts, read under
 * the lock an account claim revokes grants under (lib/auth/claim-account.ts): a consent checked
 * before the claim otherwise left the old holder a grant made after the claim's revocation.
 * `consentToken`: the form's token, which makes one grant: posted again (a double click, a replay
 * within its 15 minutes) it is refused as `used` instead of making another grant and code.
 */
export async function approveConsent(
  db: Db,
  user: AuthUser,
  request: AuthorizeRequest,
  consent: Consent,
  now: Date,
  session?: NonNullable<Credential["session"]>,
  consentToken?: string,
): Promise<string> {
  let hubIds: string[] = [];
  if (consent.hubIds) {
    // Only hubs the user belongs to right now can be granted.
    const mine = new Set((await readableHubs({ db, user, credential: FULL_ACCESS_CREDENTIAL })).map((m) => m.hub.id));
    // Lowered first, as every id is where it enters (the form posts them as given): one in upper case
    // matched none of the user's hubs and was dropped, and the app got fewer hubs than were chosen.
    hubIds = [...new Set(consent.hubIds.map(normalizeId))].filter((id) => mine.has(id));
  }
  try {
    return await db.$transaction((tx) => insertConsent(tx, user, request, consent, hubIds, now, session, consentToken));
  } catch (error) {
    // The check below runs under the user's lock; the unique index is the last word.
    if (consentToken && isUniqueViolation(error)) throw formUsed();
    throw error;
  }
}

function consentTokenHash(consentToken: string): string {
  return hashSecret(`consent:${consentToken}`);
}

/** Whether a consent form's token was used: it made its grant, or was denied. */
export async function consentTokenUsed(db: DbClient, consentToken: string): Promise<boolean> {
  const tokenHash = consentTokenHash(consentToken);
  if ((await db.oAuthGrant.findUnique({ where: { consentTokenHash: tokenHash }, select: { id: true } })) !== null) return true;
  return (await db.oAuthDeniedConsent.findUnique({ where: { consentTokenHash: tokenHash }, select: { userId: true } })) !== null;
}

/**
 * The user denied the client: the form's token is used up, as an allow's is by its grant, under the
 * same user lock insertConsent takes. A deny that recorded nothing let the same form allow after it
 * (the back button, a replay within its 15 minutes), and the app got access_denied and then a code.
 * Refused as `used` when the form was answered already.
 */
export async function denyConsent(db: Db, userId: string, consentToken: string, now: Date): Promise<void> {
  try {
    await db.$transaction(async (tx) => {
      await lockForTransaction(tx, apiKeysLockKey(userId));
      if (await consentTokenUsed(tx, consentToken)) throw formUsed();
      await tx.oAuthDeniedConsent.create({ data: { consentTokenHash: consentTokenHash(consentToken), userId, expiresAt: new Date(now.getTime() + CONSENT_TTL_MS) } });
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw formUsed();
    throw error;
  }
}

/** The refusal of a consent form submitted again. */
export function formUsed(): ApiError {
  return new ApiError("used", "This consent form has already been submitted; start connecting the app again for another sign-in");
}

/**
 * The grant and its code, inside the caller's transaction: the e-mail sign-in spends its code in the
 * same one, so a failure leaves neither. `hubIds`: the hubs picked, already narrowed to the user's.
 */
export async function insertConsent(
  tx: DbClient,
  user: AuthUser,
  request: AuthorizeRequest,
  consent: Consent,
  hubIds: string[],
  now: Date,
  session?: NonNullable<Credential["session"]>,
  consentToken?: string,
): Promise<string> {
  const code = `${CODE_PREFIX}${randomBytes(32).toString("base64url")}`;
  await lockForTransaction(tx, apiKeysLockKey(user.id));
  if (session && !(await sessionStillValid(tx, user.id, session))) {
    throw new ApiError("unauthorized", "Your session has expired or is invalid; sign in again");
  }
  const tokenHash = consentToken === undefined ? null : consentTokenHash(consentToken);
  if (tokenHash && (await consentTokenUsed(tx, consentToken!))) throw formUsed();
  // Under the user's lock, so concurrent consents cannot each find room. last_used_at is set only
  // when an access token is used, so a grant never used yet counts from its consent: ranked last,
  // a sign-in just finished was revoked by the next one (two machines in a row). A grant whose code
  // can still be exchanged is never taken: a consent and its exchange are two steps (the app's,
  // the e-mail sign-in's), and another consent in between revoked what the code was to connect.
  const pendingCode = Prisma.sql`EXISTS (SELECT 1 FROM oauth_codes c WHERE c.grant_id = g.id AND c.used_at IS NULL AND c.expires_at > ${now}::timestamptz)`;
  const beyond = await tx.$queryRaw<{ id: string; pending: boolean; expires_at: Date | null }[]>`
    SELECT g.id::text AS id, ${pendingCode} AS pending,
           (SELECT max(c.expires_at) FROM oauth_codes c WHERE c.grant_id = g.id AND c.used_at IS NULL) AS expires_at
    FROM oauth_grants g
    WHERE g.user_id = ${user.id}::uuid AND g.client_id = ${request.client.id} AND g.revoked_at IS NULL
    ORDER BY ${pendingCode} DESC, COALESCE(g.last_used_at, g.created_at) DESC, g.created_at DESC, g.id DESC
    OFFSET ${MAX_GRANTS_PER_CLIENT - 1}`;
  // Pending grants rank first, so one past the cap means every place is a sign-in still to be
  // redeemed: none may be taken, and adding one more would break the cap. Refused until the
  // first of those codes is redeemed or expires.
  const stillPending = beyond.find((g) => g.pending);
  if (stillPending) {
    const waitMs = Math.max(0, (stillPending.expires_at ?? now).getTime() - now.getTime());
    const retryAfter = retryAfterSeconds(waitMs);
    throw new ApiError("rate_limited", `${MAX_GRANTS_PER_CLIENT} sign-ins of this app are waiting to be completed; finish one or try again in ${retryAfter} s`, { limit: MAX_GRANTS_PER_CLIENT, retry_after: retryAfter }, { "Retry-After": String(retryAfter) });
  }
  if (beyond.length) {
    await tx.oAuthGrant.updateMany({
      where: { id: { in: beyond.map((g) => g.id) }, revokedAt: null, codes: { none: { usedAt: null, expiresAt: { gt: now } } } },
      data: { revokedAt: now, revokedReason: "superseded" },
    });
  }
  const grant = await tx.oAuthGrant.create({
    data: {
      id: newId(),
      userId: user.id,
      clientId: request.client.id,
      hubIds,
      allHubs: consent.hubIds === null,
      scope: consent.write && request.wantsWrite ? "read write" : "read",
      resource: request.resource,
      createdAt: now,
      consentTokenHash: tokenHash,
    },
  });
  await tx.oAuthCode.create({
    data: {
      codeHash: hashSecret(code),
      grantId: grant.id,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge,
      resource: request.resource,
      expiresAt: new Date(now.getTime() + CODE_TTL_MS),
    },
  });
  return code;
}
