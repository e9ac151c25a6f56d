import nodemailer, { type Transporter } from "nodemailer";
import SMTPTransport from "nodemailer/lib/smtp-transport/index.js";
import type { DbClient } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** What the mail is about, e.g. "invite". */
  kind: string;
  hubId?: string;
  /** The member the mail goes out for (an invitation's inviter): per-sender caps count by it. */
  senderId?: string;
  /**
   * Bearer secrets inside `text` (e.g. an invite token). Only the SMTP delivery carries them: the
   * outbox row and the log get `redact(secret)` instead, so neither is a usable capability.
   */
  secrets?: string[];
}

/**
 * What the outbox and the log show for a secret: enough to tell links apart, useless to follow. At
 * most a quarter of it, so a short secret (a six-digit sign-in code) shows one digit, not itself.
 */
export function redact(secret: string): string {
  return `${secret.slice(0, Math.min(8, Math.floor(secret.length / 4)))}…[redacted]`;
}

function redacted(message: MailMessage): string {
  let text = message.text;
  for (const secret of message.secrets ?? []) if (secret) text = text.split(secret).join(redact(secret));
  return text;
}

export interface MailDelivery {
  outbox_id: string;
  /** smtp when SMTP_URL is set; otherwise the message is kept in the outbox and logged. */
  transport: "smtp" | "outbox";
  status: "sent" | "logged" | "failed";
  error?: string;
  /**
   * With "failed": true when the message surely did not leave (the relay refused it, or it was never
   * reached); false when the connection broke with the message handed over unanswered, which the relay
   * may still have queued.
   */
  undelivered?: boolean;
}

const DEFAULT_FROM = "Engram <engram@localhost>";
/**
 * One send's transport (a plain SMTP transport keeps nothing between sends). Its log tells when the
 * connection's TLS came up, which a failure's OpenSSL reason alone cannot: nodemailer names every
 * socket error CONN, a record error after the message as a handshake that failed.
 */
function smtpTransport(url: string, tls: { up: boolean }): Transporter {
  const noted = (_entry: unknown, message: unknown, ...args: unknown[]) => {
    // "Secure connection established" (smtps, after the handshake) or the STARTTLS upgrade done.
    if ((message === "%s established to %s:%s" && args[0] === "Secure connection") || message === "Connection upgraded with STARTTLS") tls.up = true;
  };
  const quiet = () => undefined;
  // Short timeouts: a request waits for the relay, and a dead relay must not hang it for minutes.
  // Given as the transport's options: createTransport(url, …) took them as message defaults and
  // kept nodemailer's own (2 minutes to connect, 30 s for a greeting, 10 minutes of silence).
  return nodemailer.createTransport(
    new SMTPTransport({
      url,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 20_000,
      logger: { level: quiet, trace: quiet, debug: quiet, info: noted, warn: quiet, error: quiet, fatal: quiet },
    }),
  );
}

/**
 * Every mail goes through the mail_outbox table first. With SMTP_URL it is
 * sent at once and the row records sent_at or the error; without it (the
 * embedded default) the row is the record and the message is logged. The row
 * and the log never hold the message's secrets (issue 18 #1): whoever needs the
 * link without SMTP gets it from the API answer that created it.
 */
export async function sendMail(db: DbClient, message: MailMessage, now: Date): Promise<MailDelivery> {
  return deliverMail(db, await enqueueMail(db, message, now), message);
}

/** The outbox row alone (secrets redacted), e.g. inside the transaction that counts a sender's mail. */
export async function enqueueMail(db: DbClient, message: MailMessage, now: Date): Promise<{ id: string }> {
  return db.mailOutbox.create({
    data: {
      id: newId(now.getTime()),
      toAddress: message.to,
      subject: message.subject,
      body: redacted(message),
      kind: message.kind,
      hubId: message.hubId,
      senderId: message.senderId,
      createdAt: now,
    },
    select: { id: true },
  });
}

/** Whether mail leaves this server (SMTP_URL is set); otherwise it is only recorded and logged. */
export function mailLeavesServer(): boolean {
  return Boolean(process.env.SMTP_URL);
}

/** Sends an enqueued message (after its transaction committed): through SMTP_URL, or only logged. */
export async function deliverMail(db: DbClient, row: { id: string }, message: MailMessage): Promise<MailDelivery> {
  const url = process.env.SMTP_URL;
  if (!url) {
    console.info(`[mail] ${message.kind} to ${message.to} (outbox ${row.id}; set SMTP_URL to send): ${message.subject}\n${redacted(message)}`);
    return { outbox_id: row.id, transport: "outbox", status: "logged" };
  }
  const tls = { up: false };
  try {
    await smtpTransport(url, tls).sendMail({ from: process.env.MAIL_FROM || DEFAULT_FROM, to: message.to, subject: message.subject, text: message.text });
  } catch (error) {
    const reason = redacted({ ...message, text: error instanceof Error ? error.message : String(error) });
    console.error(`[mail] sending outbox ${row.id} failed: ${reason}`);
    await recordOutcome(db, row.id, { error: redacted({ ...message, text: outboxError(error) }).slice(0, 1000) });
    return { outbox_id: row.id, transport: "smtp", status: "failed", error: "The mail server did not accept the message; it stays in the outbox", undelivered: mailSurelyUndelivered(error, tls.up) };
  }
  // Past this point the relay has the mail: a failure to note that must not make the caller treat it
  // as unsent (a sign-in code would be dropped while its mail sits in the inbox).
  await recordOutcome(db, row.id, { sentAt: new Date() });
  return { outbox_id: row.id, transport: "smtp", status: "sent" };
}

/**
 * Notes a send's outcome on its outbox row. Bookkeeping only: the caller acts on what the relay said,
 * so a database that refuses this write is logged, never thrown (a thrown error there answered 500
 * and hid whether the mail left).
 */
async function recordOutcome(db: DbClient, id: string, data: { sentAt: Date } | { error: string }): Promise<void> {
  try {
    await db.mailOutbox.update({ where: { id }, data });
  } catch (error) {
    console.error(`[mail] recording the outcome of outbox ${id} failed`, error);
  }
}

/**
 * Whether a failed send surely did not deliver. A relay accepts a message only with its answer to the
 * closing dot, so nothing was delivered when the relay answered with a refusal (4xx/5xx, to the
 * envelope or to the message), refused the credentials, or was never reached (no connection, no
 * greeting, no TLS, a malformed greeting: nodemailer's connect and greeting timeouts and its TLS
 * failures come before any message), or when nodemailer failed the send itself before the relay
 * answered the message: its checks of the envelope and the message (EENVELOPE: no or a malformed
 * sender or recipient, all recipients refused; EMESSAGE: empty or over the relay's SIZE;
 * EREQUIRETLS), the message's own stream failing mid-way (ESTREAM: no closing dot was sent), a pool's
 * message limit (EMAXLIMIT), and any error nodemailer raises in its API or in a command before DATA.
 * A timeout, a dropped connection or an unexpected answer otherwise (nodemailer names every such
 * break CONN, whatever the phase, and a socket error ESOCKET) may come after the message was handed
 * over, and so does any error nodemailer does not name: not sure. `tlsUp`: the connection's TLS had
 * come up, so an OpenSSL error is a broken record at any later step, the message's included.
 */
export function mailSurelyUndelivered(error: unknown, tlsUp = false): boolean {
  const { code, responseCode, command, syscall, message } = (error ?? {}) as { code?: unknown; responseCode?: unknown; command?: unknown; syscall?: unknown; message?: unknown };
  if (typeof responseCode === "number" && responseCode >= 400) return true;
  if (typeof code === "string" && NEVER_DELIVERED_CODES.has(code)) return true;
  if (typeof command === "string" && (BEFORE_MESSAGE_COMMANDS.has(command) || command.startsWith("AUTH"))) return true;
  if (typeof message === "string" && /^(Connection timeout|Greeting never received|Invalid greeting)/.test(message)) return true;
  if (!tlsUp && tlsHandshakeFailed(error)) return true;
  return syscall === "connect" || syscall === "getaddrinfo";
}

/**
 * An smtps connection (TLS from the first byte) whose handshake failed: no SMTP was spoken, so
 * nothing left. nodemailer names it like any broken socket (ESOCKET, command CONN), which a break
 * after the message is too, so it is told by where it came from: Node's check of the relay's
 * certificate at the handshake's end (an untrusted, expired or misnamed certificate), or OpenSSL
 * refusing the handshake itself (no common protocol or cipher, a relay not speaking TLS).
 */
function tlsHandshakeFailed(error: unknown): boolean {
  const { command, stack, library, reason } = (error ?? {}) as { command?: unknown; stack?: unknown; library?: unknown; reason?: unknown };
  if (command !== "CONN") return false;
  if (typeof stack === "string" && /\bTLSSocket\.onConnectSecure\b/.test(stack)) return true;
  return library === "SSL routines" && typeof reason === "string" && TLS_HANDSHAKE_REASONS.test(reason);
}

const TLS_HANDSHAKE_REASONS = /wrong version number|handshake failure|protocol version|unsupported protocol|no protocols available|no shared cipher|certificate|packet length too long|unknown protocol/i;

const NEVER_DELIVERED_CODES = new Set(["EAUTH", "ENOAUTH", "EDNS", "ETLS", "EENVELOPE", "EMESSAGE", "EREQUIRETLS", "ESTREAM", "EMAXLIMIT"]);
// nodemailer's `command` of an error: API is its own check before anything is sent; the others fail
// before DATA. CONN (any phase) and DATA (its refusals carry a response code) are not among them.
const BEFORE_MESSAGE_COMMANDS = new Set(["API", "EHLO", "HELO", "LHLO", "STARTTLS", "MAIL FROM", "RCPT TO", "RSET"]);

/**
 * What the outbox row (and so a hub's mail list, GET /v1/hubs/:id/mail, which any hub manager reads)
 * says about a failed send. The relay's answer about the message itself (a refused recipient) is the
 * member's business; how Engram reaches the relay is not: a connection or sign-in error names its
 * host, port and the relay's login answer, and stays in the server log.
 */
function outboxError(error: unknown): string {
  const { code, response } = (error ?? {}) as { code?: unknown; response?: unknown };
  if ((code === "EENVELOPE" || code === "EMESSAGE") && typeof response === "string" && response) return `The mail server refused the message: ${response}`;
  if (code === "EAUTH" || code === "ENOAUTH") return "The mail server refused Engram's credentials; the server log has the details";
  if (code === "ECONNECTION" || code === "ETIMEDOUT" || code === "ESOCKET" || code === "EDNS" || code === "ETLS" || code === "EPROTOCOL") {
    return "Engram could not reach the mail server; the server log has the details";
  }
  return "The mail server did not accept the message; the server log has the details";
}
