import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";

/**
 * Throws conflict when the hub already has a topic of this name, ignoring case
 * ("Deploy" and "deploy" would be indistinguishable to people picking one).
 * Takes the hub's topic lock so concurrent creates and renames see each other.
 */
export async function assertTopicNameFree(tx: DbClient, hubId: string, name: string, exceptId?: string): Promise<void> {
  await lockForTransaction(tx, `topics:${hubId}`);
  const taken = await tx.topic.findFirst({
    where: { hubId, name: { equals: name, mode: "insensitive" }, ...(exceptId && { id: { not: exceptId } }) },
    select: { id: true, name: true },
  });
  if (taken) throw new ApiError("conflict", `This hub already has a topic named "${taken.name}"`, { topic_id: taken.id });
}
