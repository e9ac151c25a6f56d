import { randomInt } from "node:crypto";
import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";
import { deliverMail, enqueueMail, type MailDelivery, type MailMessage } from "@/lib/mail/send-mail.ts";
import { isCliRedirectUri } from "@/lib/oauth/cli-client.ts";
import {
  EMAIL_CODE_COOLDOWN_SECONDS,
  EMAIL_CODE_TTL_SECONDS,
  EMAIL_CODES_PER_HOUR,
  emailCodeHash,
  emailCodesPerClientHour,
  type RequestEmailCodeBody,
} from "./email-code-fields.ts";
import { signUpOpen } from "./sign-up.ts";

/** Codes in the answer instead of only by mail: a development server without SMTP (never set it in production). */
export function emailCodesReturned(): boolean {
  return process.env.ENGRAM_EMAIL_CODE_DEV_RETURN === "1";
}

/** Whether a code can reach anyone: an SMTP server, or a development server returning it. */
export function emailSignInOn(): boolean {
  return !!process.env.SMTP_URL || emailCodesReturned();
}

/**
 * POST /v1/auth/email/request: mails a six-digit sign-in code (Memax's email OTP). The answer is
 * the same whether or not the address has an account; the account is decided at verify. An
 * address with no account on a server closed to sign-ups is mailed that it has none, with no code:
 * the same work and the same answer (a mail server's refusal included) as for an account, so
 * neither the answer nor its timing tells whether one exists; only the mailbox's owner learns it.
 * A newer code replaces the older one once its mail was handed to the relay. Without SMTP_URL no code could arrive, so e-mail sign-in is
 * off (403), unless ENGRAM_EMAIL_CODE_DEV_RETURN=1 puts it in the answer.
 */
export async function requestEmailCode(ctx: RequestContext, input: RequestEmailCodeBody, clientAddress: string | undefined) {
  const devReturn = emailCodesReturned();
  if (!emailSignInOn()) {
    // Off, not broken: a 403 like a closed sign-up, so no client retries it as an outage.
    throw new ApiError("forbidden", "E-mail sign-in is off on this Engram: it needs an SMTP server (SMTP_URL). Sign in with a password or a provider instead");
  }
  if (input.redirect_uri !== undefined && !isCliRedirectUri(input.redirect_uri)) {
    throw new ApiError("invalid_request", "redirect_uri must be an http address on localhost or 127.0.0.1", { issues: [{ path: "redirect_uri", message: "not a loopback address" }] });
  }
  const email = input.email;
  const now = ctx.now();
  const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
  const secret = await serverSecret(ctx.db);
  const eligible = signUpOpen() || (await ctx.db.user.findUnique({ where: { email }, select: { id: true } })) !== null;
  const id = newId(now.getTime());
  await ctx.db.$transaction(async (tx) => {
    // The client's lock first, then the address's (as every request takes them), so none waits in a cycle.
    // A caller the server cannot place (no scripts/server.mjs, no TRUST_PROXY) has no client cap:
    // every such caller counted as one client, and one of them stopped e-mail sign-in for all.
    if (clientAddress !== undefined) await lockForTransaction(tx, `email-code-client:${clientAddress}`);
    await lockForTransaction(tx, `email-code:${email}`);
    if (clientAddress !== undefined) await assertClientMayAsk(tx, clientAddress, now);
    const retryAfter = await nextCodeIn(tx, email, now);
    if (retryAfter > 0) {
      // limit: the codes an address may be sent an hour; the cooldown between two is in the wait too.
      throw new ApiError("rate_limited", `Another code for this address can be sent in ${retryAfter} s`, { limit: EMAIL_CODES_PER_HOUR, retry_after: retryAfter }, { "Retry-After": String(retryAfter) });
    }
    // Written ended (consumed_at set) until its mail was handed to the relay: the address's earlier
    // code stays the one that works while the send waits on a slow relay (up to its timeouts), and
    // the row already counts for the cooldown and the hour, so two requests at once send one mail.
    await tx.emailSignInCode.create({
      data: {
        id,
        email,
        codeHash: emailCodeHash(secret, email, code),
        redirectUri: input.redirect_uri ?? null,
        expiresAt: new Date(now.getTime() + EMAIL_CODE_TTL_SECONDS * 1000),
        consumedAt: now,
        clientAddress: clientAddress ?? null,
        createdAt: now,
      },
    });
  });
  const message = eligible ? codeMail(email, code) : noAccountMail(email);
  const outboxRow = await enqueueMail(ctx.db, message, now).catch(async (error: unknown) => {
    // Nothing left: the retry the 500 invites must not wait out a cooldown this code never used.
    await ctx.db.emailSignInCode.deleteMany({ where: { id } });
    throw error;
  });
  const delivery = await deliverMail(ctx.db, outboxRow, message).catch((error: unknown): MailDelivery => {
    // Not a refusal the relay confirmed: it may have the mail, so the code below still becomes the
    // working one (a throw here left the mailed code ended for good and its limits spent).
    console.error(`[auth] sending the sign-in code of outbox ${outboxRow.id} ended unsure`, error);
    return { outbox_id: outboxRow.id, transport: "smtp", status: "failed", undelivered: false };
  });
  if (delivery.status === "failed" && delivery.undelivered) {
    // A code that surely never left is no code: it spends neither the cooldown nor the hour's count
    // the "try again later" below invites, and the code the address had before it still works.
    await ctx.db.emailSignInCode.deleteMany({ where: { id } });
    throw new ApiError("unavailable", "The mail server did not accept the sign-in code; try again later");
  }
  // Handed over (or maybe, see below): this code replaces the ones asked for before it, never a newer
  // one that was sent too. A send can outlast the cooldown (the relay's timeouts are per step), so a
  // later request may have sent a code meanwhile: whatever became of it (working, used, burned by wrong
  // tries), this older one stays ended, or a used or burned code's slow predecessor would come alive
  // with five fresh guesses. A newer code still being sent does not hold it back: its send may yet be
  // refused, and this mail is the one in the inbox; once the newer mail is handed over, it ends this one.
  const activate = () =>
    ctx.db.$transaction(async (tx) => {
      await lockForTransaction(tx, `email-code:${email}`);
      const mine = await tx.emailSignInCode.findUnique({ where: { id }, select: { createdAt: true } });
      if (!mine) return;
      await tx.emailSignInCode.update({ where: { id }, data: { sentAt: new Date() } });
      const newerSent = await tx.emailSignInCode.count({ where: { email, sentAt: { not: null }, ...askedAfter(mine.createdAt, id) } });
      if (newerSent > 0) return;
      await tx.emailSignInCode.updateMany({ where: { email, consumedAt: null, ...askedBefore(mine.createdAt, id) }, data: { consumedAt: new Date() } });
      await tx.emailSignInCode.updateMany({ where: { id, consumedAt: now }, data: { consumedAt: null } });
    });
  if (!(await retried(activate))) {
    // The mail is out but its code cannot be made the working one: it is no code, so it gives back
    // the cooldown and the hour's count, and the person can ask again at once instead of waiting out
    // limits spent on a code that never worked (the code before it still works).
    await ctx.db.emailSignInCode.deleteMany({ where: { id } }).catch((error: unknown) => console.error(`[auth] giving back the limits of sign-in code ${id} failed`, error));
    throw new ApiError("unavailable", "The sign-in code just mailed could not be made ready and will not work; ask for a new one");
  }
  if (delivery.status === "failed") {
    // The relay may have queued it (the connection broke after the message): the code stays, and so
    // do the cooldown and the hour's count, or a relay that queues and then times out would let
    // anyone mail an address without end. The wait as the limits count it now, after the send's timeouts.
    const retryAfter = Math.max(1, await nextCodeIn(ctx.db, email, new Date()));
    throw new ApiError(
      "unavailable",
      `The mail server did not confirm the sign-in code; it may still arrive. Another can be requested in ${retryAfter} s`,
      { retry_after: retryAfter },
      { "Retry-After": String(retryAfter) },
    );
  }
  return {
    status: "sent" as const,
    expires_in: EMAIL_CODE_TTL_SECONDS,
    email,
    cooldown: EMAIL_CODE_COOLDOWN_SECONDS,
    // Either way: a code only for accounts would tell them apart (verify refuses an address without one).
    ...(devReturn && { dev_code: code }),
  };
}

/**
 * Runs a step that must follow a mail already sent, a few times over about a second: a database
 * failing for a moment (a failover, a dropped connection) must not leave the mailed code unusable.
 * False when every try failed.
 */
async function retried(step: () => Promise<unknown>): Promise<boolean> {
  for (const pause of [100, 300, 600, 0]) {
    try {
      await step();
      return true;
    } catch (error) {
      console.error("[auth] making a mailed sign-in code the working one failed", error);
      if (pause) await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
  return false;
}

/** An address's codes asked for after the one created at `createdAt` as `id` (its time-ordered id breaks a tie within a millisecond). */
export function askedAfter(createdAt: Date, id: string) {
  return { OR: [{ createdAt: { gt: createdAt } }, { createdAt, id: { gt: id } }] };
}

function askedBefore(createdAt: Date, id: string) {
  return { OR: [{ createdAt: { lt: createdAt } }, { createdAt, id: { lt: id } }] };
}

/**
 * Refuses a client that has had emailCodesPerClientHour codes mailed within the hour. A code that
 * surely never left is deleted, so it counts for this as for the address's limits: not at all.
 */
async function assertClientMayAsk(db: DbClient, clientAddress: string, at: Date): Promise<void> {
  const cap = emailCodesPerClientHour();
  const recent = await db.emailSignInCode.findMany({
    where: { clientAddress, createdAt: { gt: new Date(at.getTime() - 3_600_000) } },
    orderBy: { createdAt: "desc" },
    select: { createdAt: true },
    take: cap,
  });
  if (recent.length < cap) return;
  const retryAfter = Math.max(1, untilOldestIsAnHourOld(recent, at));
  throw new ApiError("rate_limited", `Too many sign-in codes were asked for from this client; another can be sent in ${retryAfter} s`, { limit: cap, retry_after: retryAfter }, { "Retry-After": String(retryAfter) });
}

/** Seconds until the address may be sent another code (0: now): one a cooldown, EMAIL_CODES_PER_HOUR an hour. */
async function nextCodeIn(db: DbClient, email: string, at: Date): Promise<number> {
  const recent = await db.emailSignInCode.findMany({
    where: { email, createdAt: { gt: new Date(at.getTime() - 3_600_000) } },
    orderBy: { createdAt: "desc" },
    select: { createdAt: true },
  });
  const cooldown = recent[0] ? Math.ceil((recent[0].createdAt.getTime() + EMAIL_CODE_COOLDOWN_SECONDS * 1000 - at.getTime()) / 1000) : 0;
  // The hour's count full, the wait is until its first code is an hour old, however short the cooldown left.
  const hour = recent.length >= EMAIL_CODES_PER_HOUR ? untilOldestIsAnHourOld(recent, at) : 0;
  return Math.max(0, cooldown, hour);
}

/** Seconds from `at` until the oldest of the hour's counted codes (`recent`, newest first, not empty) is an hour old. */
function untilOldestIsAnHourOld(recent: { createdAt: Date }[], at: Date): number {
  return Math.ceil((recent[recent.length - 1]!.createdAt.getTime() + 3_600_000 - at.getTime()) / 1000);
}

function codeMail(email: string, code: string): MailMessage {
  return {
    to: email,
    subject: "Your Engram sign-in code",
    text: `Your Engram sign-in code is ${code}.\n\nIt works once, for ${EMAIL_CODE_TTL_SECONDS / 60} minutes. If you did not ask for it, ignore this e-mail.`,
    kind: "sign_in_code",
    secrets: [code],
  };
}

function noAccountMail(email: string): MailMessage {
  return {
    to: email,
    subject: "Signing in to Engram",
    text:
      "Someone asked to sign in to Engram with this address, but there is no Engram account for this address, and this server does not let new accounts sign up. " +
      "Ask its administrator for an account.\n\nIf you did not ask, ignore this e-mail.",
    kind: "sign_in_code",
  };
}
