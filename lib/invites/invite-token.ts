import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { config } from "@/lib/config.ts";

export const INVITE_TOKEN_PREFIX = "egi_";
const TOKEN_RE = /^egi_[A-Za-z0-9_-]{43}$/;

export interface IssuedToken {
  token: string;
  tokenHash: string;
  tokenEncrypted: string;
}

function keyFor(secret: Buffer): Buffer {
  return createHash("sha256").update("engram:invite-token:").update(secret).digest();
}

/**
 * A new invite token: looked up by its SHA-256 only, and also kept encrypted
 * under the instance secret because resend must mail the very same link.
 */
export function inviteToken(secret: Buffer): IssuedToken {
  const token = `${INVITE_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", keyFor(secret), iv);
  const sealed = Buffer.concat([cipher.update(token, "utf8"), cipher.final()]);
  return { token, tokenHash: hashSecret(token), tokenEncrypted: `v1.${Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString("base64url")}` };
}

/** The token back from its sealed form; undefined when the instance secret changed since. */
export function revealInviteToken(secret: Buffer, sealed: string | null, tokenHash: string): string | undefined {
  if (!sealed?.startsWith("v1.")) return undefined;
  try {
    const raw = Buffer.from(sealed.slice(3), "base64url");
    const decipher = createDecipheriv("aes-256-gcm", keyFor(secret), raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    const token = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
    return hashSecret(token) === tokenHash ? token : undefined;
  } catch {
    return undefined;
  }
}

export function looksLikeInviteToken(value: string): boolean {
  return TOKEN_RE.test(value);
}

/** Where the join page lives: ENGRAM_PUBLIC_URL, else this server on localhost. */
export function inviteUrl(token: string): string {
  const base = (config().publicUrl ?? `http://localhost:${process.env.PORT || 3000}`).replace(/\/+$/, "");
  return `${base}/invite/${token}`;
}
