import { createHash } from "node:crypto";

/** Secrets (API keys, invite tokens) are stored only as their SHA-256. */
export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}
