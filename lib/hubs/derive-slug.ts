import { randomBytes } from "node:crypto";
import { reservedSlugProblem } from "./hub-fields.ts";

const MAX_SLUG = 48;
/** "-" + 4 hex characters, appended when the plain slug is taken. */
const SUFFIX_LENGTH = 5;

/**
 * A valid slug from a hub name: lowercase ASCII, anything else becomes "-",
 * runs collapsed and trimmed; too short gets "-hub", a reserved prefix
 * ("personal-", "deleted-") gets "hub-". With `suffixed`, a short random tail makes a retry unique.
 */
export function deriveSlug(name: string, suffixed = false): string {
  let base = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  if (reservedSlugProblem(base)) base = `hub-${base}`;
  if (base.length < 3) base = base ? `${base}-hub` : "hub";
  const room = suffixed ? MAX_SLUG - SUFFIX_LENGTH : MAX_SLUG;
  base = base.slice(0, room).replace(/-+$/, "");
  return suffixed ? `${base}-${randomBytes(2).toString("hex")}` : base;
}
