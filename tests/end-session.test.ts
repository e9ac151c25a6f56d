import { afterAll, beforeAll, describe, expect, it } from "vitest";
import bcrypt from "bcryptjs";
import NextAuth from "next-auth";
import { claimAccount } from "@/lib/auth/claim-account.ts";
import { clearsSession, endSession } from "@/lib/auth/end-session.ts";
import { sessionOptions } from "@/lib/auth/session-options.ts";
import { createHarness, type Harness } from "./support/harness.ts";
import { sessionCookieFor } from "./support/oauth-consent.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

/**
 * One call of next-auth's endpoints with Engram's options, through its pages-router entry (the app
 * route reads request headers through next/headers, which needs a live Next request). Returns the
 * cookies it sets (name → value; cleared ones are left out) and its JSON answer.
 */
async function nextAuth(
  method: "GET" | "POST",
  action: string[],
  cookies: Record<string, string>,
  body: Record<string, string> = {},
  db: Harness["db"] = h.db,
): Promise<{ cookies: Record<string, string>; body: unknown }> {
  const headers: Record<string, string | string[]> = {};
  let answer: unknown;
  const res = {
    status: () => res,
    setHeader: (key: string, v: string | string[]) => ((headers[key.toLowerCase()] = v), res),
    getHeader: (key: string) => headers[key.toLowerCase()],
    send: (b: unknown) => void (answer = b),
    json: (b: unknown) => void (answer = b),
    end: () => {},
  };
  const req = { method, query: { nextauth: action }, cookies, headers: { host: "engram.test", "x-forwarded-proto": "http" }, body };
  await NextAuth(req as never, res as never, await sessionOptions(db));
  const set: Record<string, string> = {};
  for (const cookie of ([] as string[]).concat(headers["set-cookie"] ?? [])) {
    const [name, value] = cookie.split(";")[0]!.split("=") as [string, string];
    if (value) set[name] = decodeURIComponent(value);
  }
  return { cookies: set, body: answer };
}

const SESSION = "next-auth.session-token";

/** GET /api/auth/session with this Cookie header: the session cookie next-auth re-issues, if any. */
async function reissued(cookie: string): Promise<string | undefined> {
  const value = cookie.slice(cookie.indexOf("=") + 1);
  const fresh = (await nextAuth("GET", ["session"], { [SESSION]: value })).cookies[SESSION];
  return fresh && `${SESSION}=${fresh}`;
}

/** A password sign-in through next-auth (CSRF token first): the session cookie it issues. */
async function signIn(email: string, password: string, db: Harness["db"] = h.db): Promise<string> {
  const csrf = await nextAuth("GET", ["csrf"], {});
  const { csrfToken } = csrf.body as { csrfToken: string };
  const signedIn = await nextAuth("POST", ["callback", "credentials"], csrf.cookies, { email, password, csrfToken, json: "true" }, db);
  expect(signedIn.cookies[SESSION]).toBeDefined();
  return `${SESSION}=${signedIn.cookies[SESSION]}`;
}

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

  it("next-auth's session endpoint re-issues a live session, never one signed out of or cut off by a claim", async () => {
    const cara = await h.user("Cara");
    const me = (cookie: string) => h.anonymous.get("/v1/auth/me", { headers: { cookie } });
    const live = await sessionCookieFor(h.db, cara.id);
    const renewed = await reissued(live);
    expect(renewed).toBeDefined();
    expect((await me(renewed!)).status).toBe(200);

    // A copy of a cookie its owner signed out of: next-auth would hand back a new one, with a new id.
    const ended = await sessionCookieFor(h.db, cara.id);
    await endSession(h.db, ended);
    const laundered = await reissued(ended);
    if (laundered) expect((await me(laundered)).status).toBe(401);
    expect(laundered).toBeUndefined();

    // A session from before a claim (the squatter's) must not come back with a new issue time.
    const dan = await h.user("Dan");
    await h.db.user.update({ where: { id: dan.id }, data: { emailUnverified: true } });
    const squatter = await sessionCookieFor(h.db, dan.id);
    expect(await claimAccount(h.db, dan.id, new Date(Date.now() + 2000))).toBe(true);
    expect((await me(squatter)).status).toBe(401);
    expect(await reissued(squatter)).toBeUndefined();
  });

  it("signing out ends every cookie of that sign-in, one next-auth re-issued from it before too", async () => {
    const eve = await h.user("Eve");
    await h.db.user.update({ where: { id: eve.id }, data: { passwordHash: await bcrypt.hash("correct horse battery", 4) } });
    const me = (cookie: string) => h.anonymous.get("/v1/auth/me", { headers: { cookie } });
    const browser = await signIn(eve.email, "correct horse battery");
    // Whoever copied the cookie (a shared machine, a logging proxy) has it re-issued: a new cookie id.
    const copy = await reissued(browser);
    expect(copy).toBeDefined();
    expect((await me(copy!)).status).toBe(200);
    const other = await signIn(eve.email, "correct horse battery");
    expect(await endSession(h.db, browser)).toBe(true);
    expect((await me(browser)).status).toBe(401);
    expect((await me(copy!)).status).toBe(401);
    expect(await reissued(copy!)).toBeUndefined();
    // Another sign-in of the same person goes on.
    expect((await me(other)).status).toBe(200);
  });

  it("a claim ends a squatter's password sign-in it overtook, or one from the same second", async () => {
    const me = (cookie: string) => h.anonymous.get("/v1/auth/me", { headers: { cookie } });
    const squatted = async (name: string) => {
      const who = await h.user(name);
      await h.db.user.update({ where: { id: who.id }, data: { emailUnverified: true, passwordHash: await bcrypt.hash("squatter's password", 4) } });
      return who;
    };
    // The owner proves the address (a verified Google sign-in, an e-mail code) while the squatter's
    // sign-in is between its password check and its cookie.
    const gus = await squatted("Gus");
    let claimed = false;
    const user = new Proxy(h.db.user, {
      get: (target, key) =>
        key === "findUnique"
          ? async (...args: Parameters<typeof target.findUnique>) => {
              const found = await target.findUnique(...args);
              if (!claimed && found?.id === gus.id) claimed = await claimAccount(h.db, gus.id, new Date());
              return found;
            }
          : Reflect.get(target, key),
    });
    const db = new Proxy(h.db, { get: (target, key) => (key === "user" ? user : Reflect.get(target, key)) });
    const overtaken = await signIn(gus.email, "squatter's password", db);
    expect(claimed).toBe(true);
    expect((await me(overtaken)).status).toBe(401);

    // Signed in just before the claim, within the same second as it.
    const hal = await squatted("Hal");
    const justBefore = await signIn(hal.email, "squatter's password");
    expect(await claimAccount(h.db, hal.id, new Date())).toBe(true);
    expect((await me(justBefore)).status).toBe(401);
  });

  it("ended ids are kept only until their cookie would have expired", async () => {
    const bob = await h.user("Bob");
    await h.db.endedSession.create({ data: { jti: "expired-long-ago", expiresAt: new Date(Date.now() - 60_000) } });
    expect(await endSession(h.db, await sessionCookieFor(h.db, bob.id))).toBe(true);
    expect(await h.db.endedSession.count({ where: { jti: "expired-long-ago" } })).toBe(0);
  });

  it("a sign-out prunes expired ids a bounded batch at a time, never all of a backlog in one statement", async () => {
    const cat = await h.user("Cat");
    const backlog = 1200;
    const expiresAt = new Date(Date.now() - 60_000);
    await h.db.endedSession.createMany({ data: Array.from({ length: backlog }, (_, i) => ({ jti: `backlog-${i}`, expiresAt })) });
    const left = () => h.db.endedSession.count({ where: { jti: { startsWith: "backlog-" } } });
    expect(await endSession(h.db, await sessionCookieFor(h.db, cat.id))).toBe(true);
    expect(await left()).toBe(backlog - 500);
    expect(await endSession(h.db, await sessionCookieFor(h.db, cat.id))).toBe(true);
    expect(await endSession(h.db, await sessionCookieFor(h.db, cat.id))).toBe(true);
    expect(await left()).toBe(0);
  });

  it("only a response that clears the session cookie counts as a sign-out", () => {
    const cleared = new Response(null, { headers: [["set-cookie", "next-auth.session-token=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"]] });
    const kept = new Response(null, { headers: [["set-cookie", "next-auth.csrf-token=abc; Path=/; HttpOnly"]] });
    expect(clearsSession(cleared)).toBe(true);
    expect(clearsSession(kept)).toBe(false);
  });
});
