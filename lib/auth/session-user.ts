import { cookies } from "next/headers";
import { cache } from "react";
import { getDatabase } from "@/lib/db/database.ts";
import { sessionAccount, sessionTokenFrom } from "./session.ts";

/**
 * The signed-in dashboard user for server components, or null. Cached per request: the layouts
 * and the page of one navigation render concurrently and each asks.
 */
export const sessionUser = cache(async (): Promise<{ id: string; email: string; name: string } | null> => {
  const jar = await cookies();
  const header = jar
    .getAll()
    .map((cookie) => `${cookie.name}=${encodeURIComponent(cookie.value)}`)
    .join("; ");
  const { prisma } = await getDatabase();
  return (await sessionAccount(prisma, sessionTokenFrom(header))) ?? null;
});
