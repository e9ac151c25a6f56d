const MAX_DERIVED_TITLE = 80;

/** First markdown heading, else the first non-empty line, trimmed to 80 characters. */
export function deriveTitle(content: string): string {
  const lines = content.split(/\r?\n/);
  const heading = lines.find((line) => /^\s{0,3}#{1,6}\s+\S/.test(line));
  const source = heading ? heading.replace(/^\s{0,3}#{1,6}\s+/, "").replace(/\s+#+\s*$/, "") : lines.find((line) => line.trim() !== "");
  const title = (source ?? "").trim().replace(/\s+/g, " ");
  if (title.length <= MAX_DERIVED_TITLE) return title || "Untitled";
  const cut = title.slice(0, MAX_DERIVED_TITLE - 1);
  const space = cut.lastIndexOf(" ");
  return `${space > 40 ? cut.slice(0, space) : cut}…`;
}
