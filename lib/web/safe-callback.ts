/** Only same-site paths are followed after sign-in; anything else goes to the hub list. */
export function safeCallback(raw: string | string[] | undefined | null): string {
  const value = Array.isArray(raw) ? raw[0] : raw;
  // Browsers drop tabs and newlines from URLs and read "\" as "/": "/\t/evil.com" would become
  // "//evil.com", another site. Control characters, spaces and backslashes are refused outright.
  if (!value || !value.startsWith("/") || /[\u0000-\u0020\u007f\\]/.test(value)) return "/hubs";
  const base = "http://engram.invalid";
  let url: URL;
  try {
    url = new URL(value, base);
  } catch {
    return "/hubs";
  }
  if (url.origin !== base || url.pathname.startsWith("//")) return "/hubs";
  return `${url.pathname}${url.search}${url.hash}`;
}

/** A URL the auth server answered with, as a same-origin path to follow; null when it leads elsewhere. */
export function sameOriginPath(url: URL, origin: string): string | null {
  if (url.origin !== origin || url.pathname.startsWith("//")) return null;
  return `${url.pathname}${url.search}`;
}
