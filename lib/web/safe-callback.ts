/** Only same-site paths are followed after sign-in; anything else goes to the hub list. */
export function safeCallback(raw: string | string[] | undefined | null): string {
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (!value || !value.startsWith("/") || value.startsWith("//") || value.startsWith("/\\")) return "/hubs";
  return value;
}
