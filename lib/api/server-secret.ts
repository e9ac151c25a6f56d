import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { Db } from "@/lib/db/database.ts";
import { config } from "@/lib/config.ts";

const globalForSecret = globalThis as unknown as { __engramSecret?: Map<Db, Promise<Buffer>> };

/**
 * The instance's signing key (cursors, access tokens). ENGRAM_SECRET wins;
 * otherwise one is generated on first start and kept in the database so every
 * process and restart agrees.
 */
export function serverSecret(db: Db): Promise<Buffer> {
  const fromEnv = config().secret;
  if (fromEnv) return Promise.resolve(Buffer.from(fromEnv, "utf8"));
  globalForSecret.__engramSecret ??= new Map();
  let secret = globalForSecret.__engramSecret.get(db);
  if (!secret) {
    secret = (async () => {
      const candidate = randomBytes(32).toString("base64url");
      await db.setting.upsert({ where: { key: "signing_secret" }, create: { key: "signing_secret", value: candidate }, update: {} });
      const row = await db.setting.findUniqueOrThrow({ where: { key: "signing_secret" } });
      return Buffer.from(row.value, "utf8");
    })();
    const cache = globalForSecret.__engramSecret;
    cache.set(db, secret);
    // A database that failed to answer once (a restart, a failover) must not fail every signature until the process restarts.
    secret.catch(() => {
      if (cache.get(db) === secret) cache.delete(db);
    });
  }
  return secret;
}

export function sign(secret: Buffer, payload: string, bytes = 16): string {
  return createHmac("sha256", secret).update(payload).digest().subarray(0, bytes).toString("base64url");
}

export function verify(secret: Buffer, payload: string, signature: string, bytes = 16): boolean {
  const expected = Buffer.from(sign(secret, payload, bytes));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
