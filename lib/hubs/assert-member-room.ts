import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { maxHubMembers } from "./hub-fields.ts";

/**
 * Throws member_limit_reached when the hub already has maxHubMembers() members. Call inside the
 * transaction that adds the membership, after the hub's membership lock (shared): the joins lock
 * is exclusive, so concurrent accepts and adds count each other (the shared lock alone lets every
 * one of them see the same count), while pushes into the hub do not wait for it.
 */
export async function assertMemberRoom(tx: DbClient, hubId: string): Promise<void> {
  await lockForTransaction(tx, `hub-joins:${hubId}`);
  const limit = maxHubMembers();
  const count = await tx.hubMember.count({ where: { hubId } });
  if (count >= limit) {
    throw new ApiError("member_limit_reached", `This hub already has ${limit} members, the most it may have; someone must leave or be removed first`, { limit });
  }
}
