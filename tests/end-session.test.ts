import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clearsSession, endSession } from "@/lib/auth/end-session.ts";
import { createHarness, type Harness } from "./support/harness.ts";
import { sessionCookieFor } from "./support/oauth-consent.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("signing out ends the session, not only the browser's copy", () => {
  it("a session ended is refused wherever its cookie is replayed; the user's other sessions go on", async () => {
    const ann = await h.user("Ann");
    const laptop = await sessionCookieFor(h.db, ann.id);
    const phone = await sessionCookieFor(h.db, ann.id);
    const me = (cookie: string) => h.anonymous.get("/v1/auth/me", { headers: { cookie } });
    expect((await me(laptop)).status).toBe(200);
    expect(await endSession(h.db, laptop)).toBe(true);
    expect((await me(laptop)).status).toBe(401);
    expect((await me(phone)).status).toBe(200);
    // Nothing to end without a readable session cookie.
    expect(await endSession(h.db, "next-auth.session-token=garbage")).toBe(false);
    expect(await endSession(h.db, null)).toBe(false);
  });

  it("ended ids are kept only until their cookie would have expired", async () => {
    const bob = await h.user("Bob");
    await h.db.endedSession.create({ data: { jti: "expired-long-ago", expiresAt: new Date(Date.now() - 60_000) } });
    expect(await endSession(h.db, await sessionCookieFor(h.db, bob.id))).toBe(true);
    expect(await h.db.endedSession.count({ where: { jti: "expired-long-ago" } })).toBe(0);
  });

  it("only a response that clears the session cookie counts as a sign-out", () => {
    const cleared = new Response(null, { headers: [["set-cookie", "next-auth.session-token=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"]] });
    const kept = new Response(null, { headers: [["set-cookie", "next-auth.csrf-token=abc; Path=/; HttpOnly"]] });
    expect(clearsSession(cleared)).toBe(true);
    expect(clearsSession(kept)).toBe(false);
  });
});
