import { randomBytes } from "node:crypto";
import type { Db, DbClient } from "@/lib/db/database.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { newId } from "@/lib/ids.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { databaseNow } from "@/lib/db/database-now.ts";

export interface CreateUserInput {
  email: string;
  name: string;
  passwordHash?: string;
  /** A password sign-up, or a provider that did not vouch for the address: nothing has proven it yet (lib/auth/claim-account.ts). */
  emailUnverified?: boolean;
}

type NewUser = Awaited<ReturnType<typeof insertUser>>;

/**
 * Creates a user together with their personal hub (owner membership) and
 * whatever `extra` adds, in one transaction; a taken email is a conflict.
 */
export async function createUser<T = undefined>(
  db: Db,
  input: CreateUserInput,
  now: Date,
  extra?: (tx: DbClient, created: NewUser) => Promise<T>,
): Promise<NewUser & { extra: T }> {
  try {
    return await db.$transaction(async (tx) => {
      const created = await insertUser(tx, input, now);
      return { ...created, extra: (extra ? await extra(tx, created) : undefined) as T };
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError("conflict", "A user with this email already exists");
    throw error;
  }
}

async function insertUser(tx: DbClient, input: CreateUserInput, now: Date) {
  const user = await tx.user.create({
    data: {
      id: newId(now.getTime()),
      email: input.email.trim().toLowerCase(),
      name: input.name.trim(),
      passwordHash: input.passwordHash,
      emailUnverified: input.emailUnverified ?? false,
      createdAt: now,
      updatedAt: now,
    },
  });
  const hub = await tx.hub.create({
    data: {
      id: newId(now.getTime()),
      name: "Personal",
      slug: `personal-${randomBytes(6).toString("hex")}`,
      hubType: "personal",
      ownerId: user.id,
      createdAt: now,
      updatedAt: now,
      // The database's clock, as the events replayed from it on (see addMember).
      members: { create: { userId: user.id, role: "owner", joinedAt: await databaseNow(tx) } },
    },
  });
  return { user, hub };
}
