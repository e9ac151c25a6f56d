import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { MAX_HUBS_PER_USER } from "./hub-fields.ts";

/**
 * Throws hub_limit_reached when `userId` already belongs to the maximum number
 * of hubs. Call inside the transaction that adds the membership: the per-user
 * lock makes concurrent creates and joins count each other.
 */
export async function assertHubRoom(tx: DbClient, userId: string, who: "you" | "they" = "you"): Promise<void> {
  await lockForTransaction(tx, `hub-memberships:${userId}`);
  const count = await tx.hubMember.count({ where: { userId } });
  if (count >= MAX_HUBS_PER_USER) {
    const subject = who === "you" ? "You already belong" : "This user already belongs";
    throw new ApiError("hub_limit_reached", `${subject} to ${MAX_HUBS_PER_USER} hubs, the most one account can join; leave or delete one first`, {
      limit: MAX_HUBS_PER_USER,
    });
  }
}
