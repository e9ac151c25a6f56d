import { createHash, timingSafeEqual } from "node:crypto";
import { ApiError } from "@/lib/api/errors.ts";
import { config } from "@/lib/config.ts";

/** The bootstrap admin routes exist only while ENGRAM_ADMIN_TOKEN is set. */
export const adminRoutesEnabled = (): boolean => Boolean(config().adminToken);

/** Throws not_found while the admin routes are off, unauthorized for any other token. */
export function checkAdminToken(authorization: string | null): void {
  const expected = config().adminToken;
  if (!expected) throw new ApiError("not_found", "Not found");
  const given = authorization?.match(/^Bearer\s+(\S+)\s*$/i)?.[1] ?? "";
  const digest = (value: string) => createHash("sha256").update(value).digest();
  if (!timingSafeEqual(digest(given), digest(expected))) throw new ApiError("unauthorized", "Invalid admin token");
}
