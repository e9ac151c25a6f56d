import { z } from "zod";

export const MAX_USER_NAME_LENGTH = 100;

/**
 * No control character (Unicode's Cc: C0, DEL and C1). Written as ranges rather than `\P{Cc}`: the
 * pattern is published in the OpenAPI document, and generators there (Schemathesis) cannot read
 * Unicode property escapes.
 */
export const NO_CONTROL_CHARACTERS = /^[^\x00-\x1f\x7f-\x9f]*$/;

/**
 * A person's name as every way in takes it (sign-up, the admin's user creation, renaming oneself).
 * `\S`: blank names fail min(1) once trimmed; the pattern says so in the OpenAPI document. No control
 * characters: the name is written into e-mails the server sends (an invitation's "Ann invited you…"),
 * where line breaks would let it write its own paragraphs and links.
 */
export const userNameSchema = z
  .string()
  .trim()
  .min(1)
  .max(MAX_USER_NAME_LENGTH)
  .regex(/\S/, "must not be blank")
  .regex(NO_CONTROL_CHARACTERS, "must not contain control characters such as line breaks");

/**
 * A name a sign-in provider reports (GitHub, Google), made to fit the rule above instead of refusing
 * the sign-in: control characters become spaces, runs of white space one, at most 100 characters.
 */
export function providerUserName(raw: string | null | undefined, fallback: string): string {
  const cleaned = (raw ?? "").replace(/\p{Cc}/gu, " ").replace(/\s+/g, " ").trim();
  return (cleaned ? Array.from(cleaned).slice(0, MAX_USER_NAME_LENGTH).join("").trim() : "") || fallback;
}
