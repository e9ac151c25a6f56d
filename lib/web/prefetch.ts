import { randomUUID } from "node:crypto";
import { FULL_ACCESS, type AuthContext, type AuthUser } from "@/lib/api/context.ts";
import { rateLimiter } from "@/lib/api/rate-limit.ts";
import { sessionUser } from "@/lib/auth/session-user.ts";
import { getDatabase } from "@/lib/db/database.ts";

type Read<T> = (ctx: AuthContext) => Promise<T>;

/**
 * A page's first data, read on the server with the signed-in user's session and the same domain
 * function its API route calls, so the HTML already holds it and the browser does not wait for
 * hydration and a round trip before showing content. The value is what the route's JSON would
 * carry (dates as strings). Any failure returns undefined and the client fetches as usual, where
 * errors are shown the normal way.
 */
export async function prefetch<T>(read: Read<T>): Promise<T | undefined> {
  try {
    const user = await sessionUser();
    return user ? await prefetchFor(user, read) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * prefetch for a known user. It stands in for the API call the page would make, so it spends that
 * call's rate-limit budget: otherwise reloading a page would run the same reads without any limit.
 * Over the limit it reads nothing, and the page's own request then answers 429 the usual way.
 */
export async function prefetchFor<T>(user: AuthUser, read: Read<T>): Promise<T | undefined> {
  try {
    if (!(await rateLimiter().limit("regular", user.id)).success) return undefined;
    const database = await getDatabase();
    const ctx: AuthContext = {
      db: database.prisma,
      sql: database.sql,
      dbKind: database.kind,
      requestId: randomUUID(),
      now: () => new Date(),
      user,
      credential: { type: "session", ...FULL_ACCESS },
    };
    return JSON.parse(JSON.stringify(await read(ctx))) as T;
  } catch {
    return undefined;
  }
}
