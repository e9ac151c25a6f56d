import { randomBytes } from "node:crypto";

/**
 * The policy of a dashboard page. Scripts run only with this response's nonce, which Next puts on
 * its own scripts (it reads the nonce from the policy of the request it renders); 'strict-dynamic'
 * lets those load the chunks they need. Memory content, chat answers, hub names and notification
 * payloads are escaped by React and the markdown renderer; this is what still holds if some path
 * ever renders one as HTML: an injected <script>, inline handler or javascript: URL does not run.
 * Nothing else is restricted: images (view URLs) and uploads (signed PUTs) may live on the storage's
 * own origin. Dev mode's React needs eval for its error overlays; production never does.
 */
export function pagePolicy(nonce: string, dev = process.env.NODE_ENV === "development"): string {
  return [
    `script-src 'self' 'nonce-${nonce}' 'strict-dynamic'${dev ? " 'unsafe-eval'" : ""}`,
    "frame-ancestors 'none'",
    "base-uri 'self'",
    "object-src 'none'",
  ].join("; ");
}

/** 128 random bits, fresh for every page: a nonce that could be guessed or reused protects nothing. */
export function pageNonce(): string {
  return randomBytes(16).toString("base64");
}
