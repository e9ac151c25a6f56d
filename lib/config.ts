/** Environment configuration, read once. Every variable is documented in README.md. */
export interface EngramConfig {
  databaseUrl: string | undefined;
  adminToken: string | undefined;
  secret: string | undefined;
  publicUrl: string | undefined;
  rateLimits: { regular: number; heavy: number; light: number };
  upstash: { url: string; token: string } | undefined;
}

/** A whole-number setting ≥ 1 from the environment; a bad value stops start-up with a clear message. */
export function positiveIntEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

export function loadConfig(): EngramConfig {
  const upstashUrl = process.env.UPSTASH_REDIS_REST_URL;
  const upstashToken = process.env.UPSTASH_REDIS_REST_TOKEN;
  return {
    databaseUrl: process.env.DATABASE_URL || undefined,
    adminToken: process.env.ENGRAM_ADMIN_TOKEN || undefined,
    secret: process.env.ENGRAM_SECRET || undefined,
    publicUrl: process.env.ENGRAM_PUBLIC_URL || undefined,
    rateLimits: {
      regular: positiveIntEnv("ENGRAM_RATE_LIMIT_REGULAR", 300),
      heavy: positiveIntEnv("ENGRAM_RATE_LIMIT_HEAVY", 60),
      light: positiveIntEnv("ENGRAM_RATE_LIMIT_LIGHT", 600),
    },
    upstash: upstashUrl && upstashToken ? { url: upstashUrl, token: upstashToken } : undefined,
  };
}

const globalForConfig = globalThis as unknown as { __engramConfig?: EngramConfig };

export function config(): EngramConfig {
  globalForConfig.__engramConfig ??= loadConfig();
  return globalForConfig.__engramConfig;
}

/** Tests change the environment and call this to re-read it. */
export function resetConfig(): void {
  globalForConfig.__engramConfig = undefined;
}

export const VERSION = "0.1.0";
