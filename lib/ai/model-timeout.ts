import { positiveIntEnv } from "@/lib/config.ts";

/**
 * ENGRAM_MODEL_TIMEOUT_MS (default 60 s): one background call to a chat or embedding provider. The
 * embedded runner renews a job's lease on a timer, not on progress, so a provider that accepts the
 * connection and never answers would hold the memory `running` (and a concurrency slot) for good;
 * cut off, the attempt fails and is retried with backoff like any other.
 */
export function modelTimeoutMs(): number {
  return positiveIntEnv("ENGRAM_MODEL_TIMEOUT_MS", 60_000);
}
