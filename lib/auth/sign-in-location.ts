/**
 * The longest return-to a redirect to sign-in carries, counted as it is escaped into the sign-in
 * address (`callbackUrl`). An authorize request's own URL fits Node's 16 KiB of request line and
 * headers, but escaped once more (every `%` three characters more) its Location reached ~25 KiB:
 * past what proxies, browsers and the sign-in request itself take (a 431, or an answer cut off).
 * And a provider's sign-in (GitHub) carries it across its round trip in next-auth's callback-url
 * cookie, its absolute URL escaped once more: a browser drops a cookie past 4096 bytes, and the
 * person landed on the dashboard instead of the consent. 3.5 KiB leaves room for the cookie's name
 * and the site's origin.
 */
export const MAX_RETURN_TO_CHARS = 3.5 * 1024;

/** The sign-in page coming back to `returnTo` (a path on this site), or null when it would not fit. */
export function signInLocation(returnTo: string): string | null {
  const escaped = encodeURIComponent(returnTo);
  return escaped.length > MAX_RETURN_TO_CHARS ? null : `/sign-in?callbackUrl=${escaped}`;
}
