/**
 * The base URLs of the outside model services, checked at start-up. One without its scheme (the usual
 * slip: `localhost:11434/v1`) was taken as it stood: the embedder reported ready and every memory then
 * failed on its own, retry after retry, and the reranker was skipped on each recall with a warning.
 */
export function assertModelEndpoints(): void {
  for (const name of ["OPENAI_BASE_URL", "ENGRAM_RERANK_URL"]) {
    const raw = process.env[name]?.trim();
    if (!raw) continue;
    let protocol: string | undefined;
    try {
      protocol = new URL(raw).protocol;
    } catch {
      protocol = undefined;
    }
    if (protocol !== "http:" && protocol !== "https:") throw new Error(`${name} must be an http:// or https:// URL, got "${raw}"`);
  }
}
