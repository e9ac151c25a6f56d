import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Account, Profile, User } from "next-auth";
import { sessionOptions } from "@/lib/auth/session-options.ts";
import { githubUserinfo } from "@/lib/auth/github-profile.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { encode } from "next-auth/jwt";
import { linkIntentFrom, LINK_COOKIE } from "@/lib/auth/provider-link.ts";
import { sessionSecret } from "@/lib/auth/session.ts";
import { call, clientFor, createHarness, type Harness } from "./support/harness.ts";

// Linked sign-in identities (Memax's auth.listIdentities / unlinkProvider). GitHub and Google cannot
// be reached offline, so the sign-in callback next-auth calls after the provider's redirect is
// called here with what a provider returns.

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

async function providerSignIn(
  provider: "github" | "google",
  providerAccountId: string,
  user: { email: string; name: string },
  profile: Record<string, unknown> = {},
  link?: { userId: string; provider: string },
) {
  const options = await sessionOptions(h.db, { link });
  const account = { type: "oauth", provider, providerAccountId } as Account;
  return options.callbacks!.signIn!({ user: { id: providerAccountId, ...user } as User, account, profile: profile as Profile });
}

/** A client with an API key of the user a provider sign-in created (they have no key of their own yet). */
async function keyFor(email: string): Promise<ReturnType<typeof clientFor>> {
  const user = await h.db.user.findUniqueOrThrow({ where: { email } });
  return clientFor((await insertApiKey(h.db, user.id, "test", new Date())).key);
}

describe("GET /v1/auth/identities and DELETE /v1/auth/link/{provider}", () => {
  it("lists what the providers said at sign-in, refreshed at the next sign-in", async () => {
    // GitHub vouches for the address (lib/auth/github-profile.ts): the account it makes is proven.
    expect(await providerSignIn("github", "gh-1", { email: "Octo@Example.test", name: "Octo Cat" }, { email_verified: true })).toBe(true);
    const octo = await keyFor("octo@example.test");
    const first = await octo.get("/v1/auth/identities");
    expect(first.status).toBe(200);
    expect(first.body.data).toEqual([
      { id: expect.any(String), user_id: expect.any(String), provider: "github", provider_id: "gh-1", provider_email: "Octo@Example.test", provider_name: "Octo Cat", created_at: expect.any(String) },
    ]);
    expect(await providerSignIn("github", "gh-1", { email: "octo@example.test", name: "Octo the Cat" }, { email_verified: true })).toBe(true);
    expect((await octo.get("/v1/auth/identities")).body.data[0]).toMatchObject({ provider_name: "Octo the Cat", provider_email: "octo@example.test" });
    // A Google account with a verified address of the same user links to it.
    expect(await providerSignIn("google", "g-1", { email: "octo@example.test", name: "Octo" }, { email_verified: true })).toBe(true);
    expect((await octo.get("/v1/auth/identities")).body.data.map((i: { provider: string }) => i.provider)).toEqual(["github", "google"]);
    expect((await octo.get("/v1/auth/me")).body.data.connected_providers.sort()).toEqual(["github", "google"]);
  });

  it("unlinks a provider, but never the last way to sign in", async () => {
    const octo = await keyFor("octo@example.test");
    expect((await octo.delete("/v1/auth/link/github")).body).toEqual({ data: { status: "unlinked" } });
    expect((await octo.get("/v1/auth/identities")).body.data.map((i: { provider: string }) => i.provider)).toEqual(["google"]);
    // No password and nothing else linked: Google stays.
    const last = await octo.delete("/v1/auth/link/google");
    expect(last).toMatchObject({ status: 409, body: { error: { code: "conflict" } } });
    expect(await h.db.oAuthAccount.count({ where: { provider: "google", providerAccountId: "g-1" } })).toBe(1);
    expect((await octo.delete("/v1/auth/link/github")).status).toBe(404);
    expect((await octo.delete("/v1/auth/link/gitlab")).status).toBe(400);
  });

  it("a user with a password may unlink their only provider; others see none of it", async () => {
    const ann = await h.user("Ann");
    await h.db.oAuthAccount.create({ data: { id: crypto.randomUUID(), userId: ann.id, provider: "github", providerAccountId: "gh-ann" } });
    await h.db.user.update({ where: { id: ann.id }, data: { passwordHash: "scrypt$placeholder" } });
    const bob = await h.user("Bob");
    expect((await bob.get("/v1/auth/identities")).body.data).toEqual([]);
    expect((await bob.delete("/v1/auth/link/github")).status).toBe(404);
    expect(await h.db.oAuthAccount.count({ where: { userId: ann.id } })).toBe(1);
    expect((await ann.delete("/v1/auth/link/github")).status).toBe(200);
    expect(await h.db.oAuthAccount.count({ where: { userId: ann.id } })).toBe(0);
  });
});

describe("GET /v1/auth/link/{provider}: linking from a signed-in browser", () => {
  const saved = { ...process.env };
  afterAll(() => {
    for (const key of ["GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET"]) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
  });

  const sessionCookie = async (userId: string) => `next-auth.session-token=${await encode({ token: { sub: userId }, secret: await sessionSecret(h.db) })}`;
  const start = (query: string, cookie?: string) => call("GET", `/v1/auth/link/github${query}`, undefined, cookie ? { headers: { cookie } } : {});

  it("is not found for a provider the server does not offer", async () => {
    delete process.env.GITHUB_CLIENT_ID;
    expect((await start("")).status).toBe(404);
  });

  it("sends a browser without a session to sign in first, and one with a session on with a signed ten-minute intent", async () => {
    Object.assign(process.env, { GITHUB_CLIENT_ID: "id", GITHUB_CLIENT_SECRET: "secret" });
    const ann = await h.user("Linker");
    const anonymous = await start("?redirect_uri=%2Fhubs");
    expect(anonymous.status).toBe(302);
    expect(anonymous.headers.get("location")).toBe(`/sign-in?callbackUrl=${encodeURIComponent("/v1/auth/link/github?redirect_uri=%2Fhubs")}`);
    const cookie = await sessionCookie(ann.id);
    const res = await start(`?redirect_uri=${encodeURIComponent("http://engram.test/hubs/x?tab=1")}`, cookie);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe(`/link/github?next=${encodeURIComponent("/hubs/x?tab=1")}`);
    const set = res.headers.get("set-cookie")!;
    expect(set).toMatch(new RegExp(`^${LINK_COOKIE}=[^;]+; Path=/api/auth; Max-Age=600; HttpOnly; SameSite=Lax$`));
    const intentCookie = set.split(";")[0]!;
    expect(await linkIntentFrom(h.db, `a=1; ${intentCookie}; ${cookie}`, "github")).toEqual({ userId: ann.id, provider: "github" });
    // Only for the provider it was made for, and only as signed.
    expect(await linkIntentFrom(h.db, `${intentCookie}; ${cookie}`, "google")).toBeUndefined();
    expect(await linkIntentFrom(h.db, `${intentCookie.replace(/=(.)/, (_m, c: string) => `=${c === "e" ? "f" : "e"}`)}; ${cookie}`, "github")).toBeUndefined();
    // Only for the browser still signed in as the user who asked: signed out, or someone else signed
    // in on the same browser, the intent links nothing (else their sign-in would land in this account).
    expect(await linkIntentFrom(h.db, intentCookie, "github")).toBeUndefined();
    const other = await h.user("Other on the same browser");
    expect(await linkIntentFrom(h.db, `${intentCookie}; ${await sessionCookie(other.id)}`, "github")).toBeUndefined();
    // A cookie planted ahead of it (a sibling site can set one) does not hide the real one.
    expect(await linkIntentFrom(h.db, `${LINK_COOKIE}=planted.value; ${intentCookie}; ${cookie}`, "github")).toEqual({ userId: ann.id, provider: "github" });
    for (const bad of ["https://elsewhere.example/hubs", "//elsewhere.example", "javascript:alert(1)", "http://["]) {
      expect((await start(`?redirect_uri=${encodeURIComponent(bad)}`, cookie)).status, bad).toBe(400);
    }
  });

  it("the callback links the provider's account to the linking user whatever its e-mail, and never takes one from someone else", async () => {
    const ann = await h.user("Ann Linker");
    const bob = await h.user("Bob Linker");
    const link = { userId: ann.id, provider: "github" };
    expect(await providerSignIn("github", "gh-link-1", { email: "someone-else@example.test", name: "Ann on GitHub" }, {}, link)).toBe(true);
    expect(await h.db.oAuthAccount.findUnique({ where: { provider_providerAccountId: { provider: "github", providerAccountId: "gh-link-1" } } })).toMatchObject({
      userId: ann.id,
      providerEmail: "someone-else@example.test",
    });
    // No account was created for the provider's e-mail.
    expect(await h.db.user.count({ where: { email: "someone-else@example.test" } })).toBe(0);
    // Linking it again is a refresh; Bob linking Ann's GitHub account is refused.
    expect(await providerSignIn("github", "gh-link-1", { email: "someone-else@example.test", name: "Ann (renamed)" }, {}, link)).toBe(true);
    expect(await providerSignIn("github", "gh-link-1", { email: "x@example.test", name: "x" }, {}, { userId: bob.id, provider: "github" })).toBe("/link/github?error=ProviderAccountInUse");
    expect(await h.db.oAuthAccount.count({ where: { providerAccountId: "gh-link-1" } })).toBe(1);
    // A link intent for another provider does not change a Google sign-in.
    expect(await providerSignIn("google", "g-link-9", { email: "nobody-new@example.test", name: "N" }, {}, link)).toBe(true);
    expect((await h.db.oAuthAccount.findFirstOrThrow({ where: { providerAccountId: "g-link-9" } })).userId).not.toBe(ann.id);
    expect((await ann.get("/v1/auth/identities")).body.data.map((i: { provider_id: string }) => i.provider_id)).toEqual(["gh-link-1"]);
  });
});

describe("signing in with GitHub to an address that already has an account", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("links when GitHub says the address is verified, and otherwise refuses, linking nothing", async () => {
    const gus = await h.user("Gus");
    expect(await providerSignIn("github", "gh-gus-unverified", { email: gus.email, name: "Gus" })).toBe("/sign-in?error=OAuthAccountNotLinked");
    expect(await providerSignIn("github", "gh-gus-unverified", { email: gus.email, name: "Gus" }, { email_verified: false })).toBe("/sign-in?error=OAuthAccountNotLinked");
    expect(await h.db.oAuthAccount.count({ where: { userId: gus.id } })).toBe(0);
    expect(await providerSignIn("github", "gh-gus", { email: gus.email.toUpperCase(), name: "Gus" }, { email_verified: true })).toBe(true);
    expect(await h.db.oAuthAccount.findUniqueOrThrow({ where: { provider_providerAccountId: { provider: "github", providerAccountId: "gh-gus" } } })).toMatchObject({ userId: gus.id });
    expect(await h.db.user.count({ where: { email: gus.email } })).toBe(1);
  });

  // GitHub's GET /user names no verification; GET /user/emails does. next-auth's default userinfo
  // ignores it, so Engram's reads it (GitHub itself is stubbed: it cannot be reached offline).
  it("reads whether GitHub verified the address from GET /user/emails", async () => {
    const answer = (emails: unknown, status = 200) =>
      vi.stubGlobal("fetch", async (url: string) => {
        expect(String(url)).toBe("https://api.github.com/user/emails");
        return new Response(JSON.stringify(emails), { status, headers: { "content-type": "application/json" } });
      });
    const info = (email: string | null) => githubUserinfo({ client: { userinfo: async () => ({ id: 7, login: "octo", email }) }, tokens: { access_token: "gho_x" } });
    answer([{ email: "pub@example.test", primary: false, verified: true }, { email: "main@example.test", primary: true, verified: true }]);
    expect(await info("Pub@Example.test")).toMatchObject({ id: 7, email: "Pub@Example.test", email_verified: true });
    answer([{ email: "pub@example.test", primary: true, verified: false }]);
    expect(await info("pub@example.test")).toMatchObject({ email: "pub@example.test", email_verified: false });
    // No public address: the primary one, verified only if GitHub says so.
    answer([{ email: "added@example.test", primary: false, verified: false }, { email: "main@example.test", primary: true, verified: true }]);
    expect(await info(null)).toMatchObject({ email: "main@example.test", email_verified: true });
    answer([{ email: "victim@example.test", primary: true, verified: false }]);
    expect(await info(null)).toMatchObject({ email: "victim@example.test", email_verified: false });
    // GitHub not answering proves nothing.
    answer({ message: "Bad credentials" }, 401);
    expect(await info("pub@example.test")).toMatchObject({ email: "pub@example.test", email_verified: false });
  });
});
