import { timingSafeEqual } from "node:crypto";
import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { Db } from "@/lib/db/database.ts";
import type { EmailSignInCode } from "@/lib/db/generated/client.ts";
import { insertConsent } from "@/lib/oauth/approve-consent.ts";
import { redirectWith } from "@/lib/oauth/authorize-request.ts";
import { CLI_CLIENT_ID, ensureCliClient } from "@/lib/oauth/cli-client.ts";
import { redeemCodeForTokens, type TokenResponse } from "@/lib/oauth/exchange-token.ts";
import { findClient } from "@/lib/oauth/find-client.ts";
import { resourceFor } from "@/lib/oauth/public-origin.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { providerUserName } from "@/lib/users/user-name.ts";
import { EMAIL_CODE_MAX_ATTEMPTS, emailCodeHash, type VerifyEmailCodeBody } from "./email-code-fields.ts";
import { claimAccount } from "./claim-account.ts";
import { askedAfter } from "./request-email-code.ts";
import { forgiveCodeSignIn, reserveCodeSignIn } from "./sign-in-throttle.ts";
import { signUpOpen } from "./sign-up.ts";

type VerifyEmailCodeResult = TokenResponse | { status: "ok"; code: string; redirect: string; user_id: string };

const wrongCode = () => new ApiError("unauthorized", "The code is wrong or has expired; ask for a new one");

/**
 * POST /v1/auth/email/verify: a right code signs the address in, as `memax login` does: a grant of
 * the built-in CLI client with every hub and write access. An address without an account gets one
 * when sign-up is open (when closed, its code is answered as a wrong one). The answer is the token pair, or, when the code was asked
 * for with a redirect_uri, a single-use code for /v1/auth/exchange and the redirect to send it to.
 * Wrong codes count: the fifth burns the code, and each counts against the client's network address with its
 * failed password sign-ins (lib/auth/sign-in-throttle.ts), which past its free failures locks it out
 * of both. Only a try at a live code is a guess: one with none (spent by a verify it raced, expired,
 * never asked for) could sign no one in, and counts nothing. A code works once, even when two verifies race.
 * A right code is spent in the transaction that checks it, under the address's lock, so nothing
 * that commits after the check (a fifth wrong try, a newer code's request) can end it before the
 * sign-in; an attempt failing after that (the database busy, a conflict) gives it back for the retry,
 * unless a newer code's mail was handed over meanwhile.
 */
export async function verifyEmailCode(ctx: RequestContext, input: VerifyEmailCodeBody, origin: string, clientAddress: string): Promise<VerifyEmailCodeResult> {
  const { email } = input;
  const now = ctx.now();
  const row = await spendEmailCode(ctx.db, input, now, clientAddress);
  if (!row) throw wrongCode();
  try {
    return await signInWithCode(ctx, email, row, origin, now);
  } catch (error) {
    await giveCodeBack(ctx.db, row, now).catch((restoreError: unknown) => console.error("[auth] giving back an e-mail code after a failed sign-in failed", restoreError));
    throw error;
  }
}

/**
 * The address's newest code, spent if `input.code` is it (the row), else null. The try is counted
 * against the client's address before the code is checked (so tries sent at once get no more checks
 * than one after another), and given back unless it was a wrong guess at a live code; a client
 * address locked out is refused before any check. Shared by the API's verify and the dashboard's
 * sign-in form, so neither is a way around the other's limits.
 */
export async function spendEmailCode(db: Db, input: VerifyEmailCodeBody, now: Date, clientAddress: string): Promise<EmailSignInCode | null> {
  const verdict = await reserveCodeSignIn(clientAddress);
  if (!verdict.allowed) {
    const { retryAfter } = verdict;
    if (verdict.reason === "unavailable") throw new ApiError("unavailable", `Sign-in is briefly unavailable; try again in ${retryAfter} s`, { retry_after: retryAfter }, { "Retry-After": String(retryAfter) });
    throw new ApiError("rate_limited", `Too many wrong sign-in attempts from this address; try again in ${retryAfter} s`, { limit: verdict.limit, retry_after: retryAfter }, { "Retry-After": String(retryAfter) });
  }
  let checked: EmailSignInCode | "wrong" | "none";
  try {
    checked = await checkCode(db, input, now);
  } catch (error) {
    await forgiveCodeSignIn(clientAddress);
    throw error;
  }
  // Counted when reserved: only a wrong guess keeps its count.
  if (checked !== "wrong") await forgiveCodeSignIn(clientAddress);
  return checked === "wrong" || checked === "none" ? null : checked;
}

/** The address's live code, spent when `input` names it; "wrong" when it does not, "none" when there is none. */
async function checkCode(db: Db, input: VerifyEmailCodeBody, now: Date): Promise<EmailSignInCode | "wrong" | "none"> {
  const { email } = input;
  const secret = await serverSecret(db);
  // On a server closed to sign-ups, a code for an address with no account (a development server
  // returns one, ENGRAM_EMAIL_CODE_DEV_RETURN) counts as a wrong one: a 403 told the address has none.
  const eligible = signUpOpen() || (await db.user.findUnique({ where: { email }, select: { id: true } })) !== null;
  return db.$transaction(async (tx) => {
    await lockForTransaction(tx, `email-code:${email}`);
    const latest = await tx.emailSignInCode.findFirst({ where: { email, consumedAt: null, expiresAt: { gt: now } }, orderBy: { createdAt: "desc" } });
    if (!latest) return "none" as const;
    const expected = Buffer.from(latest.codeHash, "hex");
    const given = Buffer.from(emailCodeHash(secret, email, input.code), "hex");
    if (expected.length !== given.length || !timingSafeEqual(expected, given) || !eligible) {
      const attempts = latest.attempts + 1;
      await tx.emailSignInCode.update({ where: { id: latest.id }, data: { attempts, ...(attempts >= EMAIL_CODE_MAX_ATTEMPTS && { consumedAt: now }) } });
      return "wrong" as const;
    }
    await tx.emailSignInCode.update({ where: { id: latest.id }, data: { consumedAt: now } });
    return latest;
  });
}

/**
 * A spent code whose sign-in failed works again for the retry, as if never tried: only while no newer
 * code's mail was handed over (one still being sent may yet be refused, and ends this one once sent).
 */
export async function giveCodeBack(db: Db, row: EmailSignInCode, spentAt: Date): Promise<void> {
  await db.$transaction(async (tx) => {
    await lockForTransaction(tx, `email-code:${row.email}`);
    const newerSent = await tx.emailSignInCode.count({ where: { email: row.email, sentAt: { not: null }, ...askedAfter(row.createdAt, row.id) } });
    if (newerSent > 0) return;
    await tx.emailSignInCode.updateMany({ where: { id: row.id, consumedAt: spentAt }, data: { consumedAt: null } });
  });
}

/**
 * The account a spent code signs in: its address's, made when there is none and sign-up is open.
 * The code proves the address: an account a password sign-up made without proof is claimed, one
 * made a moment ago (while this sign-in was making its own) too.
 */
export async function emailCodeAccount(db: Db, email: string, now: Date): Promise<{ id: string; email: string; name: string }> {
  let user = await db.user.findUnique({ where: { email } });
  if (!user) {
    // Its account deleted since the check above.
    if (!signUpOpen()) throw wrongCode();
    try {
      // A long local part (an address may have 320 characters) is cut to the name rule's 100.
      user = (await createUser(db, { email, name: providerUserName(email.split("@")[0], "user") }, now)).user;
    } catch (error) {
      // Signed up another way a moment ago.
      user = await db.user.findUnique({ where: { email } });
      if (!user) throw error;
    }
  }
  await claimAccount(db, user.id, now);
  return { id: user.id, email: user.email, name: user.name };
}

async function signInWithCode(ctx: RequestContext, email: string, row: EmailSignInCode, origin: string, now: Date): Promise<VerifyEmailCodeResult> {
  const user = await emailCodeAccount(ctx.db, email, now);
  await ensureCliClient(ctx.db);
  const request = {
    client: await findClient(ctx.db, CLI_CLIENT_ID, now),
    redirectUri: row.redirectUri ?? "",
    state: undefined,
    codeChallenge: "",
    resource: resourceFor(origin, "/mcp"),
    wantsWrite: true,
  };
  const signedIn = user;
  return ctx.db.$transaction(async (tx) => {
    // The same grant a consented `memax login` gets: every hub, read and write.
    const code = await insertConsent(tx, signedIn, request, { hubIds: null, write: true }, [], now);
    if (row.redirectUri) return { status: "ok" as const, code, redirect: redirectWith(row.redirectUri, { code }), user_id: signedIn.id };
    return redeemCodeForTokens(ctx.db, code, CLI_CLIENT_ID, now, { withoutPkce: true, tx });
  });
}
