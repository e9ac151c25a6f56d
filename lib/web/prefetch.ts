import { randomUUID } from "node:crypto";
import { FULL_ACCESS, type AuthContext } from "@/lib/api/context.ts";
import { sessionUser } from "@/lib/auth/session-user.ts";
import { getDatabase } from "@/lib/db/database.ts";

/**
 * A page's first data, read on the server with the signed-in user's session and the same domain
 * function its API route calls, so the HTML already holds it and the browser does not wait for
 * hydration and a round trip before showing content. The value is what the route's JSON would
 * carry (dates as strings). Any failure returns undefined and the client fetches as usual, where
 * errors are shown the normal way.
 */
export async function prefetch<T>(read: (ctx: AuthContext) => Promise<T>): Promise<T | undefined> {
  try {
    const user = await sessionUser();
    if (!user) return undefined;
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
