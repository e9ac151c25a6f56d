import bcrypt from "bcryptjs";

/** bcrypt only reads the first 72 bytes; longer passwords are refused rather than silently truncated. */
export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_BYTES = 72;
/** Cost 11: ~150 ms per hash in bcryptjs on a small server — slow for guessing, fine for sign-in. */
const BCRYPT_COST = 11;

export function hashPassword(password: string): Promise<string> {
  return bcrypt.hash(password, BCRYPT_COST);
}

/** Compares in constant time per bcrypt; a missing hash (OAuth-only account) never matches. */
export async function verifyPassword(password: string, hash: string | null | undefined): Promise<boolean> {
  if (!hash) {
    // Spend the same time as a real comparison so response time does not reveal which emails exist.
    await bcrypt.compare(password, DUMMY_HASH);
    return false;
  }
  return bcrypt.compare(password, hash);
}

const DUMMY_HASH = "$2b$11$an6xqxVKh35D/8JeHNotHu0URtMRUEIUwzhimTujdHeeFocYXezpG";
