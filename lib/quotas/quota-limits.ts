/**
 * Storage quotas (issue 18): how much one user may own and one hub may hold, in content bytes and in
 * memories. One place for the numbers, so enforcement (lib/quotas/assert-storage-quota.ts) and
 * reporting (GET /v1/usage) agree. `null` means unlimited (set the variable to 0).
 *
 *   ENGRAM_QUOTA_USER_BYTES     1 GiB    content a user owns (text and attachments) in the hubs they are a member of
 *   ENGRAM_QUOTA_USER_MEMORIES  100000   memories a user owns there
 *   ENGRAM_QUOTA_HUB_BYTES      5 GiB    content in one hub
 *   ENGRAM_QUOTA_HUB_MEMORIES   500000   memories in one hub
 *   ENGRAM_QUOTA_USER_CONFIG_BYTES  100 MiB  synced agent config files a user stores, every kept version
 *
 * Byte values take an optional binary suffix: 512MiB, 2G, 100k.
 */
export interface QuotaLimit {
  bytes: number | null;
  memories: number | null;
}

export interface QuotaLimits {
  user: QuotaLimit;
  hub: QuotaLimit;
}

const GIB = 1024 ** 3;
export const DEFAULT_QUOTAS: QuotaLimits = {
  user: { bytes: 1 * GIB, memories: 100_000 },
  hub: { bytes: 5 * GIB, memories: 500_000 },
};

const UNITS: Record<string, number> = { "": 1, k: 1024, m: 1024 ** 2, g: GIB, t: 1024 ** 4 };

/** A byte size or count from the environment; throws on nonsense rather than silently not limiting. */
export function parseQuota(name: string, value: string | undefined, fallback: number | null, bytes: boolean): number | null {
  if (value === undefined || value.trim() === "") return fallback;
  const match = (bytes ? /^(\d+)\s*([kmgt]?)(?:i?b)?$/i : /^(\d+)()$/).exec(value.trim());
  if (!match) throw new Error(`${name}: "${value}" is not ${bytes ? "a size such as 512MiB" : "a whole number"}`);
  const n = Number(match[1]) * UNITS[match[2]!.toLowerCase()]!;
  return n === 0 ? null : n;
}

export function quotaLimits(env: Record<string, string | undefined> = process.env): QuotaLimits {
  return {
    user: {
      bytes: parseQuota("ENGRAM_QUOTA_USER_BYTES", env.ENGRAM_QUOTA_USER_BYTES, DEFAULT_QUOTAS.user.bytes, true),
      memories: parseQuota("ENGRAM_QUOTA_USER_MEMORIES", env.ENGRAM_QUOTA_USER_MEMORIES, DEFAULT_QUOTAS.user.memories, false),
    },
    hub: {
      bytes: parseQuota("ENGRAM_QUOTA_HUB_BYTES", env.ENGRAM_QUOTA_HUB_BYTES, DEFAULT_QUOTAS.hub.bytes, true),
      memories: parseQuota("ENGRAM_QUOTA_HUB_MEMORIES", env.ENGRAM_QUOTA_HUB_MEMORIES, DEFAULT_QUOTAS.hub.memories, false),
    },
  };
}

/** Default of configBytesLimit: far above any account's instruction files, far below 500 files x 50 versions x 512 KiB. */
export const DEFAULT_CONFIG_BYTES = 100 * 1024 ** 2;

/** Bytes of synced config content (every kept version, lib/configs) one user may store; null: unlimited. */
export function configBytesLimit(env: Record<string, string | undefined> = process.env): number | null {
  return parseQuota("ENGRAM_QUOTA_USER_CONFIG_BYTES", env.ENGRAM_QUOTA_USER_CONFIG_BYTES, DEFAULT_CONFIG_BYTES, true);
}

/**
 * Stops start-up on a quota setting that is no size or count (`1.5G`, `lots`). Read only per request,
 * such a setting let the server start and then failed every push and /v1/usage with a 500.
 */
export function assertQuotaLimits(): void {
  quotaLimits();
  configBytesLimit();
}
